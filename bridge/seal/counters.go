package seal

// Counters count what a Channel sealed, opened and refused, by reason.
type Counters struct {
	Sealed          uint64 // frames sealed under session keys
	SealedHandshake uint64 // frames sealed under the handshake key
	Opened          uint64 // frames opened under session keys
	OpenedHandshake uint64 // frames opened under the handshake key

	Malformed        uint64 // short, wrong version, body length, mode or reserved bits
	NotSealed        uint64 // SEALED flag clear: unkeyed frames refused
	NoSession        uint64 // session frames with no session keys (either direction)
	UnknownEpoch     uint64 // no receive key for the epoch and generation
	Replayed         uint64 // seen already, or left of the replay window
	AuthFailed       uint64 // tag did not verify: forged, altered or other keys
	HandshakeRefused uint64 // a message other than HELLO, HELLO-ACK or RESET under the handshake key
	Exhausted        uint64 // Seal refused: the hard per-key limit or the epoch space ran out

	TxRekeys        uint64 // the sender moved to a new epoch
	RxRotations     uint64 // the receiver moved to the peer's new epoch
	PreviousRetired uint64 // previous receive keys dropped after their grace
	KeysInstalled   uint64 // InstallKey calls that took a new generation
	KeyActivations  uint64 // a newer generation became the one the sender moves to

	// UnknownGeneration counts those of UnknownEpoch whose generation
	// matches no key held at all: the peer seals under another pair key
	// generation. LastUnknownGeneration is the generation of the latest
	// of them (its low 8 bits, all the wire carries): a record, not a
	// count, kept here because a refused frame changes no key state.
	UnknownGeneration     uint64
	LastUnknownGeneration uint8
}
