package bridge

import "time"

// Counters are the bridge's statistics, a plain struct that drivers export
// (for example to Prometheus). Totals only grow; the gauges (TagsInUse,
// SRTT, RTO) are current values.
type Counters struct {
	FramesSent, FramesReceived uint64
	BytesSent, BytesReceived   uint64
	// FramesDropped: received frames dropped as malformed, for another pair
	// or version, or out of protocol (HandleFrame returned an error).
	FramesDropped uint64

	// Frames HandleFrame dropped for their clear dxpu header, keyed or
	// not, before anything else (the seal included) read them; each is in
	// FramesDropped too.
	DroppedMalformed   uint64 // shorter than the 40-byte dxpu header
	DroppedVersion     uint64 // version nibble (byte 0) is not 1
	DroppedUnknownPair uint64 // pair ID (bytes 2-4) is not this bridge's: another pair's frame

	// DroppedForeignSource: datagrams the transport dropped for coming from
	// an address other than the peer's, before the bridge saw them (so not
	// in FramesDropped). The bridge itself never counts it: driver.Runner's
	// Counters fill it in from a transport that counts them (bridge/udp,
	// bridge/afpacket, bridge/afxdp).
	DroppedForeignSource uint64

	TLPsFromLocal  uint64 // accepted by HandleTLP
	TLPsSent       uint64 // first transmissions
	Retransmits    uint64 // TLP retransmissions
	RTOs           uint64 // retransmission timeouts fired
	TLPsReceived   uint64 // new TLPs accepted from the fabric
	TLPsDelivered  uint64 // handed to the local side by NextTLP
	PayloadBytesRx uint64 // payload bytes of TLPs accepted from the fabric
	PayloadBytesTx uint64 // payload bytes of first transmissions

	AcksSent, NaksSent, NaksReceived uint64 // standalone ACK/NAK frames
	KeepalivesSent                   uint64
	Duplicates                       uint64 // TLPs received again (already acked)
	OutOfWindow                      uint64 // TLPs beyond the reorder window
	RxOverruns                       uint64 // TLPs refused for a full class buffer (peer overran credits)
	BogusCredits                     uint64 // credit limits beyond what the peer's buffers can hold, ignored

	CreditStalls [NumClasses]uint64 // per class: times the head waited for peer credits
	TagStalls    uint64             // HandleTLP refused a request for want of a tag

	TagsInUse, TagsHighWater uint64
	CompletionTimeouts       uint64
	UnmatchedCompletions     uint64 // completions matching no request, dropped
	LateCompletions          uint64 // completions for a request already timed out, dropped
	ByteCountMismatches      uint64 // completions whose Byte Count disagreed with the request

	SynthesizedUR, SynthesizedCA uint64
	PostedLost                   uint64
	CompletionsLost              uint64 // outbound completions dropped on link down
	StaleRequestsDropped         uint64 // queued requests dropped after their timeout

	LinkUps, LinkDowns uint64
	SRTT, RTO          time.Duration

	// Keyed pairs only (see Keys in the package doc). Frames the seal
	// refused, by reason, before any of their fields took effect; each is
	// in FramesDropped too. (A short header, another version or another
	// pair's ID are refused before the seal: DroppedMalformed,
	// DroppedVersion, DroppedUnknownPair.)
	DroppedUnsealed      uint64 // no SEALED flag: unkeyed frames on a keyed pair
	DroppedForged        uint64 // tag did not verify: forged, altered, or sealed under other keys (pair, session, restart)
	DroppedReplayed      uint64 // packet number seen already or left of the replay window
	DroppedUnknownKey    uint64 // epoch and generation with no receive key
	DroppedNoSession     uint64 // session frames while this side has no session keys
	DroppedSealMalformed uint64 // seal layer malformed: sealed body shorter than the seal's overhead, bad body length, wrong mode or reserved bits
	DroppedHandshakeType uint64 // a message other than HELLO, HELLO-ACK or RESET under the handshake key

	FramesSealed   uint64 // frames sealed (handshake key included)
	FramesOpened   uint64 // frames that authenticated
	SealFailures   uint64 // frames the seal refused to seal (key exhausted: the peer echoed no epoch); lost
	TxRekeys       uint64 // this side's sender moved to a new key epoch
	RxKeyRotations uint64 // the receiver moved to the peer's new epoch
	KeysInstalled  uint64 // pair key generations taken (Config.Key included)
	KeyActivations uint64 // a newer generation became the one this side seals under

	// DroppedUnknownGeneration: those of DroppedUnknownKey sealed under a
	// pair key generation this side does not hold: the two sides were
	// given different keys or generations. LastUnknownGeneration is the
	// generation of the latest (its low 8 bits, all the wire carries).
	DroppedUnknownGeneration uint64
	LastUnknownGeneration    uint32
}
