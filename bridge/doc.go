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
//	00 00 00 01 04 03 04 00  04 00 00 00 00 00 80 03
//	00 00 80 00 00 00 80 00
//
//	17           version 1, flags 0x7: ACK, CREDIT and SACK fields valid
//	03           NAK
//	12 34 56     pair 0x123456
//	00 00 00     no TLPs, no body
//	11 3c 39 fc  Seq: the GPU side's next sequence number (no TLP here)
//	a0 7b d7 47  Ack: every host TLP before 0xa07bd747 arrived (ISN + 3)
//	00 00 00 01  SACK bit 0: TLP 0xa07bd748 (the fifth) is held
//	04 03        PH limit 1027: 1024 posted headers (the default) + 3 released
//	04 00 04 00  NPH, CplH limits 1024
//	00 00        no infinite credits, reserved
//	00 00 80 03  PD limit 32771: 32768 + three 16-byte writes released
//	00 00 80 00  NPD limit 32768     00 00 80 00  CplD limit 32768
//
// # Keys
//
// A pair configured with a Key (32 random bytes the manager issues to both
// bridges of the pair, with a KeyGeneration) seals every frame it sends
// and opens every frame it takes with bridge/seal: AES-256-GCM (SealMode
// seal.ModeGCM, the default) or integrity-only AES-256-GMAC. The 40-byte
// header stays in clear (the switch forwards on the pair ID, unchanged),
// flag bit 3 (SEALED) is set, and the body becomes a 12-byte security
// header, the body (encrypted in GCM mode) and a 16-byte tag over all of
// it: 28 bytes more per frame (seal.Overhead), so the frame builder fills
// at most MTU - 28 bytes and seals last. The sealed layout and the nonce
// construction are in the seal package doc, byte by byte. Without a Key
// the pair runs unkeyed exactly as before (the emulated demo does);
// RequireKeys makes New refuse a config without one, which daemons set.
//
// HandleFrame checks the clear header, then opens. A frame shorter than
// the header, of another version or naming another pair is dropped first,
// keyed or not (DroppedMalformed, DroppedVersion, DroppedUnknownPair). A
// frame that is not sealed, does not authenticate (forged, altered,
// sealed under an earlier session's or another generation's keys), is
// replayed or too old for the replay window, or names an unknown key
// epoch is dropped before any of its fields (Seq, Ack, SACK, credits,
// control message) takes effect; the error wraps ErrFrame and the seal's
// sentinel, the Dropped* counters say why, and a refusal allocates
// nothing. So a datagram that
// knows the pair ID, the peer's address and the next sequence numbers
// writes nothing, and no RESET or HELLO but the peer's own, fresh one
// ends a session.
//
// Session keys. A keyed HELLO or HELLO-ACK carries, after the 40 bytes of
// tlp/encap's message, a 16-byte key nonce the sender draws for every
// session (receivers that parse only the 40 bytes ignore it):
//
//	off len field (CONTROL body)
//	  0  40 HELLO or HELLO-ACK as in tlp/encap (session at 4-7, ISN at 16-19)
//	 40  16 key nonce: random per session of the sender
//
// When a side learns the peer's session (where it restarts its receive
// sequence numbers) it starts the seal's session with, for each side,
// the 20 bytes session (big-endian) || key nonce; the session keys of both
// directions derive from the pair key, the pair ID, the generation and both
// of these (HKDF, see seal), so a restart of either side yields unrelated
// keys and every frame of an earlier life fails authentication. Session
// nonces, initial sequence numbers and key nonces come from crypto/rand
// unless Config.Seed asks for a reproducible sequence (simulations in
// virtual time only). When the session ends (link down, RESET, Reset) the
// session keys go; HELLO, HELLO-ACK and RESET are sealed under the pair's
// handshake key instead, which needs no session, and numbered by the
// sender's wall clock (SetWallClock; drivers pass their start time):
// the receiver takes a handshake frame only if numbered above every one it
// took before, so a replayed HELLO or RESET is refused, and a restarted
// bridge, whose clock has moved on, is let in. (A wall clock stepped back
// delays a restarted bridge's handshake until it passes its old numbers.)
// Nonces under the handshake key do not rest on the clock: the seal draws
// a random boot ID per bridge, carries it in every handshake frame (8
// bytes after the security header: 36 bytes more than the plain frame)
// and puts it in the nonce, so a restart under a static key with the
// clock set back repeats none.
// KEEPALIVE, its ACK and all data, ACK, NAK and credit frames need session
// keys.
//
// A retransmission is a new frame with a new packet number, so the seal's
// replay window (2048 packet numbers per key) and the bridge's sequence
// numbers never interact: a replayed frame dies in the seal, a duplicate
// TLP in a fresh frame in the bridge.
//
// Rekeying, lossless both. Each sender moves to a new key epoch after
// RekeyAfter frames (default 2^22), on Rekey (`dxpu ctl rekey`), or when a
// newer generation became active, but only once the peer's echo shows it
// opens nothing older; the receiver keeps the previous epoch's key for
// RekeyGrace frames of the new one (default 4096) or RekeyGraceTime after
// the first of them (default 1 s, by the bridge's now; Deadline includes
// it), whichever comes first, so frames reordered across the switch still
// open and a pair that carries only keepalives completes a rekey or key
// change within about RekeyGraceTime. A sender whose peer echoes nothing for
// 2 * RekeyAfter frames stops sealing (SealFailures; the frames are lost
// and retransmitted later), which only a side sending into a one-way
// outage reaches: RekeyAfter must stay well above a window of frames. The
// manager changes the pair key with InstallKey(gen, key) on both bridges,
// then ActivateKey on one or both; the other follows when it sees the new
// generation, and the old key is forgotten once neither side uses it.
//
// Worked example: the first HELLO of a keyed host side (pair 0x123456,
// Seed 1, GMAC so the body stays readable, the pair key of TestDocKeyedHello):
//
//	18 05 12 34 56 00 00 5c     version 1, SEALED; CONTROL; pair; body 92 = 56 + 36
//	a0 7b d7 44 00 00 00 00     Seq (the ISN), Ack 0: not up, no other fields
//	00 00 00 00 00 00 00 00     (24 more header bytes, all 0)
//	00 00 00 00 00 00 00 00
//	00 00 00 00 00 00 00 00
//	00 82 00 00                 epoch 0; GMAC under the handshake key; echo 0; generation 0
//	00 00 00 00 00 00 00 00     packet number: the clock, 0 at now 0
//	59 1f 55 6d c8 86 20 97     boot ID: random per start (from the Seed here)
//	01 01 01 08 c2 34 b7 bc     HELLO, version 1, host, 8 tag bits; session 0xc234b7bc
//	00 00 00 00 04 00 02 14     peer session unknown; window 1024; max TLP 532
//	a0 7b d7 44 04 00 04 00     ISN; PH 1024, NPH 1024 (the defaults)
//	04 00 00 00 00 00 80 00     CplH 1024, none infinite; PD 32768
//	00 00 80 00 00 00 80 00     NPD 32768, CplD 32768
//	4c 0f e5 94 a7 a6 0f 85     key nonce
//	2a 06 c9 3b 4d ef a2 7b
//	b0 fe 91 ee 5e da 7f e5     tag
//	03 4f f9 86 bf 6a 84 9f
//
// # Memory
//
// A bridge allocates at New: (3 TxQueue + Window) transmit slots and
// (Window + the three receive queue depths) receive slots of 16 +
// MaxPayload + 4 bytes each, two tag tables of 1024 entries, and rings.
// With the defaults (Window 1024, TxQueue 256, MaxPayload 512, 1024 headers
// per class) that is about 3 MiB of address space, of which the pages a
// busy pair cycles through are touched (free slots are reused last-freed
// first). A keyed bridge adds an MTU-sized scratch
// frame and the seal's keys and replay windows (about 3 KiB).
package bridge
