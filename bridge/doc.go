// Package bridge is the per-pair edge logic of dxpu: the state machine that
// carries PCIe TLPs between a host-side and a GPU-side bridge over a lossy,
// reordering Ethernet fabric so that the remote GPU still behaves like a
// native PCIe endpoint. One Bridge serves one host-GPU pair; the same code
// runs on both sides, the Role is a parameter.
//
// # Sans-I/O
//
// A Bridge owns no goroutine, socket or clock, and allocates nothing per
// TLP once built (every buffer is a preallocated ring or slot pool), so it
// can be embedded in SmartNIC firmware, driven in virtual time (bridge/vpair,
// internal/pairsim) or by a real-time driver (bridge/driver over bridge/udp
// or bridge/afpacket). Inputs and outputs:
//
//	in:  HandleTLP(now, tlp)       TLP from the local PCIe side (copied)
//	     HandleFrame(now, frame)   dxpu frame from the fabric, from the dxpu header on
//	     HandleTimeout(now)        when now >= Deadline()
//	     Release(class, hdr, data) the local side drained TLPs: credits return
//	     Reset(now)                explicit session reset
//	out: NextFrame(now, buf)       frame to send (call until it returns 0)
//	     NextTLP(accept)           TLP for the local side (with the ordering rules)
//	     NextEvent()               link up/down, surprise removal, posted TLPs lost, completion timeout
//	     Deadline()                when to call again; Counters()
//
// Time is a time.Duration since any epoch the driver likes. A driver's loop
// after every input is: drain NextFrame, drain NextTLP, drain NextEvent,
// arm a timer for Deadline.
//
// # Parts
//
// A Bridge composes small unexported parts, one file each, each tested on
// its own:
//
//   - retransmitQueue (retransmit.go): every sent, unacknowledged TLP by
//     sequence number; applies acks and SACKs and marks TLPs to send again
//     (NAK, RACK-style overtaking, answered RTO probe).
//   - reorderWindow (reorder.go): received TLPs held until the ones before
//     them arrive; classifies arrivals (new, old, duplicate of a held one,
//     beyond the window) and builds the SACK bitmap.
//   - sendCredits (sendcredits.go): the credits the peer granted, per
//     credit type; whether a TLP of a class may go.
//   - recvCredits (recvcredits.go): this side's buffers per class: held,
//     handed out, released, and the limits advertised.
//   - tagTable (tags.go): wire tags of forwarded requests, completion
//     accounting, timeouts and quarantine.
//   - rttEstimator (rtt.go): SRTT, RTTVAR and RTO (RFC 6298).
//   - the ordering rules (order.go), ID translation (translate.go), rings
//     and slot pools (ring.go).
//
// Per-class arrays have NumClasses entries indexed by tlp.Class
// (tlp.Posted, tlp.NonPosted, tlp.Completion).
//
// # Link state machine
//
//	        HELLO every HelloInterval
//	Init ----------------------------> Up <----------------------+
//	(HandleTLP: ErrNotUp)   echo of our   |                      |
//	                        session seen  | silence >= DeadAfter, | handshake
//	                                      | RESET, peer restarted,| (new sessions,
//	                                      | Reset()               |  new ISNs)
//	                                      v                      |
//	                                     Down -------------------+
//	                    (new NP requests: UR; new posted: reported lost)
//
// The handshake (CONTROL messages, see tlp/encap control.go) exchanges the
// session nonces, roles, pair ID, tag space, reorder window, largest TLP,
// the initial sequence number and the initial credits. A side is up once it
// sees its own session echoed; a peer's TLP or ACK frame also completes a
// handshake whose last HELLO-ACK was lost.
//
// # Reliable delivery
//
// Every TLP gets a 32-bit sequence number; a TLP frame carries consecutive
// ones (Seq, Seq+1, ...), as many TLPs as fit the MTU (at most 255). Every
// frame, of any type, carries the cumulative Ack (the next sequence number
// expected: all before it arrived), a 32-bit SACK bitmap (bit i: TLP
// Ack+1+i is held out of order) and the six cumulative credit limits. So
// acknowledgements ride on reverse traffic; without any, a standalone ACK
// goes out AckDelay after the first unacknowledged frame, or at once after
// two frames, a duplicate or a TLP outside the window. When TLPs arrive
// behind a hole the receiver sends a NAK at once (once per hole, again only
// if the hole outlives two RTTs).
//
// The sender keeps every unacknowledged TLP in a retransmit queue of Window
// TLPs (also the most in flight, and the receiver's reorder window). It
// retransmits (a) on a NAK, the frame that carried the missing TLP; (b)
// RACK-style, a TLP that at least three later transmissions overtook, as far
// as the SACK bitmap can tell (an acknowledgement arriving sooner than the
// minimum RTT after a retransmission is taken for the original's); (c) on
// the retransmission timeout, nothing at first: a KEEPALIVE probe goes out,
// and its KEEPALIVE-ACK, which acknowledges everything the peer received
// before the probe, names exactly the TLPs to resend. A timeout that fired
// only because acknowledgements were late thus costs one probe, not a
// window of duplicates. The timeout follows RFC 6298: SRTT and RTTVAR from
// TLPs sent once (Karn), RTO = SRTT + max(1 us, 4 RTTVAR) within [MinRTO,
// MaxRTO], doubled on each expiry. The receiver drops TLPs before Ack (duplicates, and acks at once),
// beyond its window, and whole frames that do not parse, belong to another
// pair or acknowledge TLPs never sent. While up, a silent side sends a
// KEEPALIVE every Keepalive; the peer answers it at once.
//
// # Flow control
//
// Credits are end to end, per class (posted, non-posted, completion), in
// header units and 16-byte data units, as in PCIe. The receiving bridge
// advertises what its buffers hold (Config.Credits; a zero field is
// infinite, as endpoints advertise completions) and the sender never
// exceeds it: a TLP needs one header credit and ceil(payload/16) data
// credits of its class, checked as PCIe does, (limit - (consumed+need)) mod
// 2^N <= 2^(N-1) with N = 16 for headers and 32 for data. A received TLP
// holds its credits until the local PCIe side calls Release (or at once
// with AutoRelease); the new cumulative limits ride on the next frame (a
// standalone CREDIT after AckDelay). Limits only move forward, so lost or
// reordered updates are harmless; a sender stalled on credits with nothing
// in flight probes with a KEEPALIVE every RTO.
//
// # Ordering
//
// TLPs from the local side wait in one queue per class. The next to send is
// the oldest queue head that has credits and may pass everything queued
// before it (same traffic class rules, PCIe ordering table): a posted
// request never passes a posted request (FIFO); posted requests and
// completions always pass non-posted requests, so a non-posted queue
// starved of credits blocks neither (no deadlock); a non-posted request
// never passes a posted one unless IDO allows (different requester); a
// completion never passes a posted request unless it has RO, or IDO and a
// different ID, or completes an IO/config write. Behind a held completion,
// a later one that may pass (RO) goes first, but completions of one
// request never reorder. The link keeps sequence order; the receiving side
// queues per class again and NextTLP(accept) applies the same rules when
// the local side takes only some classes.
//
// # Tags
//
// Every non-posted request sent to the peer gets a wire tag from a table
// sized to the peer's tag space (8-bit: 0..255; 10-bit: 256..1023, 768
// tags), reused least recently first. The entry keeps the local requester
// ID and tag (restored on the completions), the bytes expected (from Length
// and byte enables, atomic operand size, or one DW), and the issue time.
// Completions are matched by wire tag and requester ID; split completions
// are accounted until the one carrying the last byte (Byte Count), a
// non-SC status, or a completion without data ends the request. A request
// open for CompletionTimeout is answered by the bridge with a CA completion
// (Byte Count = bytes still owed) and an EventCompletionTimeout; its tag is
// quarantined until the late completion shows up (dropped, LateCompletions)
// or another timeout passes, so a late completion can never match a newer
// request. Completions matching nothing are dropped (UnmatchedCompletions);
// requests delivered to the local side are recorded per session too, so
// completions from the local side for requests of an old session are
// dropped as well. A full table makes HandleTLP return ErrBusy.
//
// # ID translation
//
// IDMap pairs local and wire routing IDs (the wire uses the host's
// numbering); requester, completer and config target IDs, and the target of
// ID-routed messages, are mapped on the way out and back. With ConvertType1
// the bridge is the virtual downstream port: a type 1 config request for
// DownstreamBus becomes type 0.
//
// # Link loss and flaps
//
// dxpu resumes without loss or duplication when it can, and resets
// explicitly when it cannot:
//
//   - An outage shorter than DeadAfter is invisible to the PCIe sides:
//     retransmission refills every hole; duplicates are dropped by sequence
//     number; no TLP is lost, duplicated or reordered.
//   - After DeadAfter of silence (or a RESET, or a HELLO showing the peer
//     restarted) the session is over: every outstanding request (in flight
//     or queued) gets a UR completion; unacknowledged posted TLPs are
//     dropped and reported (EventPostedLost with their addresses — an upper
//     bound, since a write may have arrived with its ack lost);
//     unacknowledged completions are dropped (the requester's bridge answers
//     their requests with UR); the host side raises EventSurpriseRemoval.
//     While down, new requests get UR at once and new posted TLPs are
//     reported lost. TLPs already received stay deliverable.
//   - When the peer answers again, both sides handshake a new session with
//     new nonces and new initial sequence numbers: nothing of the old
//     session is retransmitted, and a request is never executed twice.
//
// # Wire example
//
// The GPU side acknowledging the host side's posted writes: three arrived,
// the fourth was lost, the fifth is held out of order, so the
// acknowledgement goes out at once as a NAK (an ACK is the same with type
// 0x02):
//
//	17 03 12 34 56 00 00 00  11 3c 39 fc a0 7b d7 47
//	00 00 00 01 00 43 00 40  00 40 00 00 00 00 08 03
//	00 00 08 00 00 00 08 00
//
//	17           version 1, flags 0x7: ACK, CREDIT and SACK fields valid
//	03           NAK
//	12 34 56     pair 0x123456
//	00 00 00     no TLPs, no body
//	11 3c 39 fc  Seq: the GPU side's next sequence number (no TLP here)
//	a0 7b d7 47  Ack: every host TLP before 0xa07bd747 arrived (ISN + 3)
//	00 00 00 01  SACK bit 0: TLP 0xa07bd748 (the fifth) is held
//	00 43        PH limit 67: 64 posted headers + 3 released
//	00 40 00 40  NPH, CplH limits 64
//	00 00        no infinite credits, reserved
//	00 00 08 03  PD limit 2051: 2048 + three 16-byte writes released
//	00 00 08 00  NPD limit 2048      00 00 08 00  CplD limit 2048
//
// # Memory
//
// A bridge allocates at New: (3 TxQueue + Window) transmit slots and
// (Window + the three receive queue depths) receive slots of 16 +
// MaxPayload + 4 bytes each, two tag tables of 1024 entries, and rings.
// With the defaults (Window 256, TxQueue 64, MaxPayload 512, 64 headers per
// class) that is about 470 KiB.
package bridge
