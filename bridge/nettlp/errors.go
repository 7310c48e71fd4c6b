package nettlp

import "errors"

// Sentinel errors; every error of this package wraps one of them (or
// ErrOutOfRange from a Memory).
var (
	// ErrShortDatagram: a datagram too short for the NetTLP header and a TLP.
	ErrShortDatagram = errors.New("nettlp: short datagram")
	// ErrMalformedRequest: the TLP cannot be served as it stands (truncated
	// header, reserved Fmt/Type, payload missing, byte enables that name no
	// bytes).
	ErrMalformedRequest = errors.New("nettlp: malformed request")
	// ErrUnsupported: a TLP the target does not serve (IO, config, AtomicOp,
	// message, completion); non-posted ones are answered with UR.
	ErrUnsupported = errors.New("nettlp: unsupported TLP")
	// ErrConfig: a bad configuration value.
	ErrConfig = errors.New("nettlp: bad configuration")
	// ErrTimeout: a libtlp-style client waited 500 ms for a completion.
	ErrTimeout = errors.New("nettlp: completion timeout")
	// ErrBadCompletion: a client got a completion it cannot use (not a CplD,
	// non-SC status, truncated).
	ErrBadCompletion = errors.New("nettlp: bad completion")
	// ErrClosed: the transport is closed.
	ErrClosed = errors.New("nettlp: closed")
)
