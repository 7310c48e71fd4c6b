// Package seal is the keyed-frame layer of a bridge pair: it seals every
// dxpu frame a bridge sends with AES-256-GCM (or, integrity only,
// AES-GMAC) under keys only the two bridges of the pair hold, and opens
// what arrives, refusing forged, altered, replayed and stale frames. It is
// sans-I/O like the bridge: no sockets, goroutines or clocks; the caller
// passes frames (and, for handshake frames, its wall clock) and gets
// frames back. One Channel serves one side of one pair.
//
// Without it, one forged UDP datagram that knows only the pair ID and the
// peer's address writes device memory, a forged RESET or HELLO tears the
// pair down, and a frame captured before a restart is accepted after it.
// The models are PCIe IDE (AES-GCM per stream, keys refreshed without
// loss), MACsec and WireGuard (per-peer keys, replay windows, rekeying
// without loss).
//
// # Wire format
//
// A sealed frame keeps the 40-byte dxpu v1 header in clear (the switch
// forwards on the pair ID; the XDP program does not change), sets flag bit
// 3, SEALED (byte 0: 0x08), and its body is:
//
//	off len field
//	  0  40 dxpu header (tlp/encap); byte 0 bit 3 SEALED; bytes 6-7 body length = 12 + n + 16 (20 + n + 16 under the handshake key)
//	 40   1 epoch: low 8 bits of the sender's key epoch (0 under the handshake key)
//	 41   1 kind: bits 1:0 mode (1 AES-256-GCM, 2 AES-256-GMAC); bit 7 handshake key; bits 6:2 zero
//	 42   1 echo: low 8 bits of the oldest epoch the sender still opens from its peer (0 under the handshake key)
//	 43   1 generation: low 8 bits of the manager's pair key generation
//	 44   8 packet number, big-endian: 0, 1, 2 ... per sending key; the handshake key's follows a clock
//	 52   8 under the handshake key only: the sender's boot ID (random, drawn when its channel is built)
//	 52   n the plain body encrypted (GCM) or as it was (GMAC); under the handshake key at 60
//	52+n 16 tag (60+n under the handshake key)
//
// The additional data is bytes 0-51 (0-59 under the handshake key): the
// header as sent (SEALED set, the sealed body length) and the security
// header, so no field (pair ID, Seq, Ack, SACK, credits, message type,
// epoch, packet number, boot ID) can be changed; in GMAC mode the
// plaintext is empty and the additional data runs on to the end of the
// body. Open ignores bytes after the body (padding).
//
// The 96-bit nonce of a session frame is
//
//	byte 0     the sender's role (1 host side, 2 GPU side)
//	bytes 1-3  the key epoch, low 24 bits
//	bytes 4-11 the packet number, big-endian
//
// and the 136-bit nonce of a handshake frame (AES-GCM hashes a nonce of
// other than 96 bits into its first counter block; SP 800-38D allows it)
//
//	byte 0     the sender's role
//	bytes 1-8  the sender's boot ID, as in bytes 52-59
//	bytes 9-16 the packet number, big-endian
//
// A nonce never repeats under one key. Every session key belongs to one
// sender (the role is in its derivation), one session, one generation
// and one epoch; its packet numbers count up from 0 and the sender stops
// at 2 * RekeyAfter (ErrKeyExhausted; it moves to a new epoch long before,
// at RekeyAfter, default 2^22: AES-GCM's confidentiality limit in RFC 9001
// is 2^23 packets per key). The handshake key depends only on the pair
// key, its generation and the sender's role, so with a static pair key it
// is the same in every boot of a sender; its packet numbers follow the
// sender's clock (the larger of it and the last plus one), which may be
// set back between boots. The boot ID keeps those nonces apart: within a
// boot the packet number strictly increases, and two boots share a nonce
// only if they drew the same 64-bit ID (about k^2/2^65 over k boots of one
// key), whatever the clock did. The boot ID costs no key derivation: a
// forged handshake frame is still one AES-GCM check. Role and epoch in the
// nonce are defence in depth.
//
// # Keys
//
// The manager issues a random 256-bit pair key per pair and a generation
// number (InstallKey; out of scope here). From it, with HKDF-SHA256 (RFC
// 5869, crypto/hkdf):
//
//	handshake PRK = Extract(salt "dxpu-seal-v1 handshake" | pair ID (3) | generation (4), pair key)
//	session PRK   = Extract(salt "dxpu-seal-v1 session" | pair ID (3) | generation (4) |
//	                         len | host side's session nonce | len | GPU side's session nonce, pair key)
//	key           = Expand(PRK, "dxpu-seal-v1 key" | sender role (1) | mode (1) | epoch (4), 32)
//
// So every direction, mode, epoch, session and generation has its own
// AES-256 key; a frame of an earlier session (either side restarted and
// drew a new session nonce) or of another pair fails authentication. The
// session nonces must come from crypto/rand (4 to 32 bytes; 16 advised).
//
// # The handshake key
//
// HELLO, HELLO-ACK and RESET are sent before session keys exist (they
// carry the nonces), so SealHandshake seals them under the handshake key
// (kind bit 7) and Open admits nothing else under it (ErrHandshakeType).
// Their packet numbers follow the sender's wall clock, and the receiver
// accepts only numbers above the newest it authenticated, for as long as
// it lives: a replayed HELLO or RESET is refused, so no third party can
// tear a pair down. (After the receiver restarts it has no session to
// lose; a replayed HELLO then names a stale session the handshake never
// completes with, as the completing echo needs the receiver's fresh nonce.)
// The clock orders handshake frames for the replay rule only; their
// nonces are unique by the boot ID (see Wire format). A sender whose
// clock was set back is refused by a peer that outlived it until its
// clock passes the newest number the peer saw: a wait, never a repeated
// nonce.
//
// Pair 0x123456, pair key 00 01 02 ... 1f (generation 1), AES-256-GCM,
// the host side with boot ID b0 07 1d 2c 3b 4a 59 68 seals a HELLO at
// clock 0x0102030405 (the body is 12 bytes here: a HELLO's first 12):
//
//	13 05 12 34 56 00 00 0c     version 1, ACK|CREDIT; CONTROL; pair; body 12
//	00 00 00 00 a0 7b d7 47     Seq 0, Ack 0xa07bd747
//	00 00 00 00 00 00 00 00
//	00 00 00 00 00 00 00 00
//	00 00 00 00 00 00 00 00
//	01 01 01 00 0a 0b 0c 0d     HELLO, control version 1, host side, byte 3 0; session 0x0a0b0c0d
//	00 00 00 00                 peer session 0
//
// sealed, 88 bytes:
//
//	1b 05 12 34 56 00 00 30     flags ACK|CREDIT|SEALED; body 48 = 20 + 12 + 16
//	00 00 00 00 a0 7b d7 47
//	00 00 00 00 00 00 00 00
//	00 00 00 00 00 00 00 00
//	00 00 00 00 00 00 00 00
//	00 81 00 01                 epoch 0; GCM, handshake key; echo 0; generation 1
//	00 00 00 01 02 03 04 05     packet number: the clock
//	b0 07 1d 2c 3b 4a 59 68     boot ID
//	f2 96 a4 4b 48 d5 03 2a     the 12-byte body, encrypted
//	8e 96 50 b2
//	69 27 38 c3 8b 90 46 71     tag
//	1f 09 b2 d3 de 11 4a ec
//
// Its key is Expand(handshake PRK, "dxpu-seal-v1 key" 01 01 00000000, 32)
// and its nonce 01 b0071d2c3b4a5968 0000000102030405. TestDocExample
// checks both blocks too.
//
// # Replay window
//
// Each receive key has a window of WindowLen = 2048 packet numbers behind
// the newest it authenticated, a bitmap ring as in WireGuard: a frame at
// or left of the window's edge, or already seen, is ErrReplayed. The
// window is checked before and moved only after authentication; a frame
// that fails any check changes no key state (only counters).
//
// # Rekeying without loss
//
// The sender moves to epoch e+1 after RekeyAfter frames, on Rekey, or
// when a newer generation became active, but only once the peer's echo
// shows it opens nothing older than e: the peer then holds the key of e+1
// already, and nothing of e-1 is still awaited. The receiver keeps three
// kinds of keys: the current epoch's, the previous one's (retired after
// PreviousGrace frames authenticated under the current one, default 4096,
// or PreviousGraceTime after the first of them, default 1 s, whichever
// comes first, or at the next move) and the next one's, under every
// generation held (a sender moves to epoch e+1 whether or not it changes
// generation; before the session's first move also epoch 0 under the
// other generations, for a peer that activated one before the session
// started). The first frame authenticated under a next key makes it
// current; frames of the old epoch reordered behind it still open during
// the grace, so reordering across the switch loses nothing. The channel
// reads no clock:
// its owner passes its time to Tick (before each Open, and at Deadline);
// the time bound is what lets a pair that carries only keepalives finish
// a rekey in about PreviousGraceTime rather than PreviousGrace keepalive
// intervals.
//
// A manager key change: InstallKey(generation, key) on both sides (each
// opens the new generation at once), then ActivateKey on one or both; a
// side that sees its peer's frames under the new generation activates it
// too. Each side's next epoch is then under the new key, and the old pair
// key is forgotten once neither direction uses it and the peer's frames
// were seen under another (a peer that has not activated the change yet
// seals its HELLOs under the old key, also after a session ended).
//
// # Worked example
//
// Pair 0x123456, pair key 00 01 02 ... 1f (generation 1), host side
// session nonce 0a 0b 0c 0d, GPU side 11 3c 39 fc, AES-256-GCM. The plain
// frame is the host side's first TLP frame: Seq 7, Ack 3, PH limit 32, one
// 3DW MRd of one DW at 0xf0001000 from 01:00.0 with tag 5:
//
//	13 01 12 34 56 01 00 0e     version 1, ACK|CREDIT; TLP; pair; N 1; body 14
//	00 00 00 07 00 00 00 03     Seq 7, Ack 3
//	00 00 00 00 00 20 00 00     SACK 0, PH limit 32, NPH 0
//	00 00 00 00 00 00 00 00     CplH 0, infinite mask, reserved, PD 0
//	00 00 00 00 00 00 00 00     NPD 0, CplD 0
//	00 0c                       TLP 0 is 12 bytes
//	00 00 00 01 01 00 05 0f     MRd: Length 1, requester 01:00.0, tag 5, first BE f
//	f0 00 10 00                 address 0xf0001000
//
// sealed by the host side (epoch 0, packet number 0), 82 bytes:
//
//	1b 01 12 34 56 01 00 2a     flags ACK|CREDIT|SEALED; body 42 = 12 + 14 + 16
//	00 00 00 07 00 00 00 03     Seq, Ack: unchanged, in clear
//	00 00 00 00 00 20 00 00     SACK, credit limits: unchanged, in clear
//	00 00 00 00 00 00 00 00
//	00 00 00 00 00 00 00 00
//	00 01 00 01                 epoch 0; GCM, session key; echo 0; generation 1
//	00 00 00 00 00 00 00 00     packet number 0
//	9f 40 3e c5 bc 29 a0 0f     the 14-byte body, encrypted
//	fa 99 fa 6e d6 5c
//	41 38 db cd b6 ee 9f a1     tag
//	0a 52 18 20 41 a2 cb cc
//
// Its nonce is 01 000000 0000000000000000 (host side, epoch 0, packet
// number 0).
// TestDocExample checks both blocks against the code byte for byte.
//
// # Key log
//
// Config.KeyLog, when set, gets every PRK a channel derives (Secret): the
// handshake PRK of each generation, and the session PRK of each generation
// held when a session starts or a generation is installed during one. One
// line each (Secret.AppendLine, ReadKeyLog; the format is in
// docs/protocol.md), as TLS's SSLKEYLOGFILE; an Unsealer opens captured
// frames with them offline (`dxpu pcap unseal`). A session PRK opens both
// directions and every epoch of its session, the pair key never appears.
//
// # Integration with bridge.Bridge
//
// When a pair is configured with a key, the bridge owns a Channel and:
//
//   - Seals at the frame boundary: the frame builder (NextFrame) writes the
//     plain frame into a scratch buffer and Seals it into the caller's
//     buffer (which must have Overhead bytes more room, HandshakeOverhead
//     for a handshake frame; the MTU budget of TLP frames shrinks by
//     Overhead, and HELLOs are far below it). HELLO, HELLO-ACK and RESET go
//     through SealHandshake with the driver's wall clock (the sans-I/O
//     bridge's time is relative, so the driver passes an absolute clock in
//     or the bridge keeps an offset), everything else through Seal.
//   - Opens first in HandleFrame: OpenFrame turns the sealed frame back
//     into the plain frame in place, then parsing goes on as today. A
//     frame without SEALED (ErrNotSealed) or failing any check is dropped
//     and counted, before any of its fields (pair ID, acks, credits, control
//     messages) has effect; with a key configured, unkeyed frames are never
//     accepted, and a RESET or HELLO can only tear a session down when it
//     opened.
//   - Carries the session nonces in the handshake: the bridge appends a
//     16-byte key nonce (crypto/rand, per session) to HELLO and HELLO-ACK
//     after the 40-byte message (ParseControl ignores trailing bytes, so
//     no control version bump), and each side's session nonce here is its
//     32-bit session || key nonce, 20 bytes (see Keys in the bridge
//     package doc). StartSession(local, peer) is
//     called when the bridge learns the peer's session (the same place it
//     resets rcvNext today), EndSession when the session ends (goDown),
//     Rekey from `ctl rekey`, InstallKey/ActivateKey from the agent.
//   - Keeps its own sequence numbers: the replay window runs on the
//     frame's packet number, which every transmission (a retransmitted TLP
//     included) draws anew, so a retransmission is a new, valid frame,
//     while the bridge keeps discarding TLPs it already holds by sequence
//     number. The two never interact: a replayed frame dies here, a
//     duplicate TLP in a fresh frame dies in the bridge.
package seal
