package syncbuf

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Writers on several goroutines while a reader reads: every write lands
// whole (run with -race to see the lock at work).
func TestConcurrentWrites(t *testing.T) {
	t.Parallel()
	var b Buffer
	const writers, each = 4, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if n, err := fmt.Fprintf(&b, "w%d %03d\n", w, i); n != 7 || err != nil {
					t.Errorf("Write: %d, %v; want 7 bytes, no error", n, err)
					return
				}
			}
		}()
	}
	for range each {
		_ = b.String()
		_ = b.Lines()
	}
	wg.Wait()
	if b.Len() != writers*each*7 {
		t.Fatalf("Len %d, want %d", b.Len(), writers*each*7)
	}
	lines := b.Lines()
	if len(lines) != writers*each {
		t.Fatalf("%d lines, want %d", len(lines), writers*each)
	}
	for _, l := range lines {
		if len(l) != 6 || l[0] != 'w' {
			t.Fatalf("line %q: writes interleaved", l)
		}
	}
}

// Lines: nil when empty, the last newline dropped, an unfinished last line
// kept.
func TestLines(t *testing.T) {
	t.Parallel()
	var b Buffer
	if l := b.Lines(); l != nil {
		t.Fatalf("empty buffer: %q, want nil", l)
	}
	b.Write([]byte("a=1\nb=2\n"))
	if l := b.Lines(); !slices.Equal(l, []string{"a=1", "b=2"}) {
		t.Fatalf("two lines: %q", l)
	}
	b.Write([]byte("c="))
	if l := b.Lines(); !slices.Equal(l, []string{"a=1", "b=2", "c="}) {
		t.Fatalf("an unfinished line: %q", l)
	}
	if s := b.String(); s != "a=1\nb=2\nc=" {
		t.Fatalf("String %q", s)
	}
}

// Await: closed at once for a text already written, on the write that
// completes a text split across writes, never for a text not written.
func TestAwait(t *testing.T) {
	t.Parallel()
	var b Buffer
	b.Write([]byte("event=link-up\n"))
	select {
	case <-b.Await("link-up"):
	default:
		t.Fatal("Await of a text already written is not closed")
	}
	split, never, other := b.Await("served 4 TLPs"), b.Await("never"), b.Await("link-down")
	b.Write([]byte("served 4 "))
	select {
	case <-split:
		t.Fatal("Await closed on half its text")
	default:
	}
	b.Write([]byte("TLPs\nlink-down\n"))
	for what, c := range map[string]<-chan struct{}{"a text split across writes": split, "a second text in one write": other} {
		select {
		case <-c:
		default:
			t.Errorf("Await of %s is not closed after the write that completes it", what)
		}
	}
	select {
	case <-never:
		t.Fatal("Await of a text never written is closed")
	default:
	}
	if n := len(b.wants); n != 1 {
		t.Fatalf("%d waits kept, want 1 (the one not seen): closed ones must go", n)
	}
	if !strings.Contains(b.String(), "TLPs") {
		t.Fatalf("String %q lost a write", b.String())
	}
}
