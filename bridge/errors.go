package bridge

import "errors"

// Sentinel errors; callers match them with errors.Is.
var (
	// ErrConfig is wrapped by Config.Validate errors.
	ErrConfig = errors.New("bridge: bad config")
	// ErrMalformedTLP is wrapped when the local side hands over a TLP that
	// does not parse or exceeds MaxPayload.
	ErrMalformedTLP = errors.New("bridge: malformed TLP")
	// ErrPeerTLPSize, wrapped with ErrMalformedTLP: the TLP is larger than
	// the peer announced it takes (its MaxPayload is smaller than ours).
	ErrPeerTLPSize = errors.New("larger than the peer takes")
	// ErrBusy: the class queue or the tag table is full; offer the TLP again
	// after the bridge made progress (frames received, timers run).
	ErrBusy = errors.New("bridge: queue full")
	// ErrFrame is wrapped by HandleFrame errors for frames that are dropped.
	ErrFrame = errors.New("bridge: frame dropped")
	// ErrRelease: more credits released than TLPs delivered.
	ErrRelease = errors.New("bridge: credit release exceeds delivered TLPs")
)
