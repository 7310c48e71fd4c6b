// Package syncbuf is a buffer that goroutines (a logger's, a process's
// output copier) write while a test reads it. Only tests import it
// (internal/layering keeps it out of the binary).
package syncbuf

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer is a mutex-guarded bytes.Buffer that also says when a text has
// appeared in it. The zero value is an empty buffer ready to use.
type Buffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wants []want
}

type want struct {
	text string
	seen chan struct{}
}

// Write appends p and closes the Await channels whose text is now in.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.b.Write(p)
	kept := s.wants[:0]
	for _, w := range s.wants {
		if bytes.Contains(s.b.Bytes(), []byte(w.text)) {
			close(w.seen)
		} else {
			kept = append(kept, w)
		}
	}
	s.wants = kept
	return n, err
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Len returns how many bytes were written so far.
func (s *Buffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

// Lines returns what was written so far split into lines, without the
// last line's newline; nil when nothing was written.
func (s *Buffer) Lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s.b.String(), "\n"), "\n")
}

// Await returns a channel closed once text has been written (at once if
// it already has).
func (s *Buffer) Await(text string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := want{text, make(chan struct{})}
	if bytes.Contains(s.b.Bytes(), []byte(text)) {
		close(w.seen)
	} else {
		s.wants = append(s.wants, w)
	}
	return w.seen
}
