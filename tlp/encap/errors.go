package encap

import (
	"errors"
	"fmt"
)

// Sentinel errors, matched with errors.Is. ParseFrame wraps them in a
// *FrameError that names the field and its byte offset in the frame.
var (
	ErrShort        = errors.New("frame too short")                           // shorter than the headers it starts
	ErrTruncated    = errors.New("frame truncated")                           // lengths say more bytes than the frame holds
	ErrVLAN         = errors.New("bad VLAN tagging")                          // too many tags
	ErrIPv4Header   = errors.New("bad IPv4 header")                           // version, IHL, total length
	ErrIPv4Checksum = errors.New("bad IPv4 header checksum")                  // checksum does not verify
	ErrFragment     = errors.New("fragmented datagram")                       // TLP datagram split by IP fragmentation
	ErrUDPLength    = errors.New("bad UDP length")                            // < 8, or beyond the IP datagram
	ErrVersion      = errors.New("unsupported dxpu version")                  // version nibble is not 1
	ErrMsgType      = errors.New("unknown dxpu message type")                 // not 1..5
	ErrBodyLength   = errors.New("bad dxpu body length")                      // disagrees with the UDP length
	ErrTLPCount     = errors.New("bad TLP count")                             // count vs message type or body
	ErrTLPLength    = errors.New("bad TLP length")                            // length table entries
	ErrNetTLP       = errors.New("bad NetTLP datagram")                       // shorter than its 6-byte header, or no TLP
	ErrTooLarge     = errors.New("frame contents exceed the format's limits") // builders: counts and lengths
)

// CutBySnaplen says that a frame did not parse (err from ParseFrame)
// because a capture's snap length cut it: its record keeps fewer bytes
// (kept) than the frame had (length), before the end of the headers the
// parser needed. It was cut, not wrong; a frame cut short whose bytes
// before the cut are wrong fails on those bytes, not on its length.
func CutBySnaplen(err error, kept, length int) bool {
	return kept < length && (errors.Is(err, ErrShort) || errors.Is(err, ErrTruncated))
}

// FrameError reports what is wrong with a frame and where.
type FrameError struct {
	Offset int    // byte offset of the field in the frame
	Field  string // the field, e.g. "ipv4.checksum", "dxpu.version", "dxpu.tlp_len[3]"
	Err    error  // one of the sentinel errors above
	Detail string // values involved
}

// Error names the field, its offset, the sentinel and the values.
func (e *FrameError) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("encap: %s at offset %d: %v", e.Field, e.Offset, e.Err)
	}
	return fmt.Sprintf("encap: %s at offset %d: %v: %s", e.Field, e.Offset, e.Err, e.Detail)
}

// Unwrap returns the sentinel.
func (e *FrameError) Unwrap() error { return e.Err }

func ferr(off int, field string, err error, format string, args ...any) error {
	return &FrameError{Offset: off, Field: field, Err: err, Detail: fmt.Sprintf(format, args...)}
}
