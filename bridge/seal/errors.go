package seal

import (
	"errors"
	"fmt"
)

// Sentinel errors, matched with errors.Is. Errors about a frame are a
// *FrameError naming the field and its byte offset (from the dxpu header)
// and wrapping one of these.
var (
	ErrShort         = errors.New("frame too short")                                 // shorter than the dxpu header, or a sealed body shorter than its overhead
	ErrVersion       = errors.New("unsupported dxpu version")                        // version nibble is not 1
	ErrNotSealed     = errors.New("frame not sealed")                                // Open: SEALED flag clear (an unkeyed frame on a keyed pair)
	ErrAlreadySealed = errors.New("frame already sealed")                            // Seal: SEALED flag set on a plaintext frame
	ErrBodyLength    = errors.New("body length disagrees with the frame")            // header body length vs bytes present
	ErrTooLong       = errors.New("sealed body would exceed the 16-bit body length") // Seal: body + overhead > 65535
	ErrMode          = errors.New("wrong protection mode")                           // security header mode is not the pair's
	ErrReserved      = errors.New("reserved bits set")                               // security header bits that must be 0
	ErrUnknownEpoch  = errors.New("no key for this epoch and generation")            // not the previous, current or next receive key
	ErrAuth          = errors.New("authentication failed")                           // forged, altered, or sealed under other keys
	ErrReplayed      = errors.New("replayed or too old")                             // packet number seen, or left of the replay window
	ErrNoSession     = errors.New("no session keys")                                 // StartSession not called (or EndSession since)
	ErrKeyExhausted  = errors.New("key exhausted")                                   // hard per-key frame limit or epoch space used up
	ErrHandshakeType = errors.New("message not allowed under the handshake key")     // only HELLO, HELLO-ACK and RESET are
	ErrKey           = errors.New("bad pair key")                                    // wrong length, stale or clashing generation
	ErrConfig        = errors.New("bad seal configuration")
)

// FrameError reports what is wrong with a frame and where.
type FrameError struct {
	Offset int    // byte offset of the field from the start of the dxpu header; -1: the tag, at the body's end
	Field  string // the field, e.g. "dxpu.flags", "seal.epoch", "seal.tag"
	Err    error  // one of the sentinel errors above
	Detail string // values involved; empty on the preallocated hot-path errors
}

// Error names the field, its offset, the sentinel and the values.
func (e *FrameError) Error() string {
	if e.Offset < 0 {
		return fmt.Sprintf("seal: %s (the body's last %d bytes): %v", e.Field, TagLen, e.Err)
	}
	if e.Detail == "" {
		return fmt.Sprintf("seal: %s at offset %d: %v", e.Field, e.Offset, e.Err)
	}
	return fmt.Sprintf("seal: %s at offset %d: %v: %s", e.Field, e.Offset, e.Err, e.Detail)
}

// Unwrap returns the sentinel.
func (e *FrameError) Unwrap() error { return e.Err }

func ferr(off int, field string, err error, format string, args ...any) error {
	return &FrameError{Offset: off, Field: field, Err: err, Detail: fmt.Sprintf(format, args...)}
}

// Rejections a flood of forged or replayed frames would hit: preallocated
// so that rejecting them costs no allocation. Callers must not modify them.
var (
	errAuthFrame     error = &FrameError{Offset: -1, Field: "seal.tag", Err: ErrAuth}
	errReplayFrame   error = &FrameError{Offset: offPN, Field: "seal.packet_number", Err: ErrReplayed}
	errUnknownFrame  error = &FrameError{Offset: offEpoch, Field: "seal.epoch/generation", Err: ErrUnknownEpoch}
	errNotSealedFrm  error = &FrameError{Offset: 0, Field: "dxpu.flags", Err: ErrNotSealed}
	errNoSessionOpen error = &FrameError{Offset: offKind, Field: "seal.kind", Err: ErrNoSession}
)
