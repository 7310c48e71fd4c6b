package capture

import (
	"bytes"
	"fmt"
	"io"
)

// MaxErrorLines bounds the frames Info and Convert report one by one: a
// small gzip can inflate to millions of broken frames, and their report must
// not fill a disk. Past it, frames are only counted, and one closing line
// says how many were not shown.
const MaxErrorLines = 1000

// errLines passes the first MaxErrorLines lines written to it to w and
// counts the rest (each Write is one line or more).
type errLines struct {
	w      io.Writer
	lines  int
	hidden int
}

func (e *errLines) Write(p []byte) (int, error) {
	n := bytes.Count(p, []byte{'\n'})
	if e.w == nil || e.lines >= MaxErrorLines {
		e.hidden += n
		return len(p), nil
	}
	e.lines += n
	return e.w.Write(p)
}

// close writes the count of the lines not shown, if any.
func (e *errLines) close(what string) {
	if e.hidden > 0 && e.w != nil {
		fmt.Fprintf(e.w, "%d more %s not shown (only the first %d are printed)\n", e.hidden, what, MaxErrorLines)
	}
}
