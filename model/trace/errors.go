package trace

import (
	"errors"
	"fmt"
	"io"
)

// SyntaxError reports input that is not a well-formed trace: malformed or
// truncated JSON, or a value of the wrong type where the trace format needs
// one. Offset counts bytes of JSON text (after gzip decompression) from the
// start of the input to where decoding stopped.
type SyntaxError struct {
	Offset int64
	Msg    string
	Err    error // io.ErrUnexpectedEOF for truncated input, a read error, or nil
}

func (e *SyntaxError) Error() string {
	if e.Err != nil && !errors.Is(e.Err, io.ErrUnexpectedEOF) {
		return fmt.Sprintf("trace: byte %d: %s: %v", e.Offset, e.Msg, e.Err)
	}
	return fmt.Sprintf("trace: byte %d: %s", e.Offset, e.Msg)
}

func (e *SyntaxError) Unwrap() error { return e.Err }

// ErrNoEvents is returned for a well-formed JSON document that holds no
// traceEvents array (or an empty top-level array).
var ErrNoEvents = errors.New("trace: no traceEvents in input")

// ErrNotAFile: the path names a directory, not a trace file.
var ErrNotAFile = errors.New("a directory: a trace is a file (PyTorch profiler JSON, gzip, or an nsys SQLite export)")

// ErrNotTrace is returned when the top-level value is neither an object nor
// an array, so the input cannot be a Chrome trace.
var ErrNotTrace = errors.New("trace: input is not a Chrome trace (want a JSON object or array)")
