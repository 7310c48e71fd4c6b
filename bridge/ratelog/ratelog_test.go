package ratelog

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTest(t *testing.T) (*Limiter, *fakeClock, *bytes.Buffer) {
	t.Helper()
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := &fakeClock{t: time.Unix(1000, 0)}
	return New(log, time.Second, c.now), c, &buf
}

func lines(b *bytes.Buffer) []string {
	s := strings.TrimSpace(b.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// TestFloodBecomesOneCount: 5000 occurrences in one interval give the
// first line and, once the interval is over, one count line.
func TestFloodBecomesOneCount(t *testing.T) {
	t.Parallel()
	l, c, buf := newTest(t)
	for range 5000 {
		l.Log(slog.LevelWarn, "posted-lost", 2, "bridge event", "event", "posted-lost")
		c.add(100 * time.Microsecond) // 5000 in 0.5 s
	}
	if n := len(lines(buf)); n != 1 {
		t.Fatalf("%d lines inside the interval, want 1:\n%s", n, buf)
	}
	l.Flush(false)
	if n := len(lines(buf)); n != 1 {
		t.Fatalf("flush before the interval ended wrote a count:\n%s", buf)
	}
	c.add(600 * time.Millisecond)
	l.Flush(false)
	got := lines(buf)
	if len(got) != 2 || !strings.Contains(got[1], "posted-lost x4999 in the last 1.1s") ||
		!strings.Contains(got[1], "suppressed=4999") || !strings.Contains(got[1], "amount=9998") || !strings.Contains(got[1], "level=WARN") {
		t.Fatalf("lines:\n%s", buf)
	}
	// The interval is over: the next occurrence is logged again.
	l.Log(slog.LevelWarn, "posted-lost", 1, "bridge event", "event", "posted-lost")
	if n := len(lines(buf)); n != 3 {
		t.Fatalf("after the interval: %d lines\n%s", n, buf)
	}
}

// TestNextOccurrenceWritesCount: without a flush, the first occurrence
// after the interval writes the count, then its own line.
func TestNextOccurrenceWritesCount(t *testing.T) {
	t.Parallel()
	l, c, buf := newTest(t)
	for range 3 {
		l.Log(slog.LevelInfo, "k", 0, "m")
	}
	c.add(2 * time.Second)
	l.Log(slog.LevelInfo, "k", 0, "m")
	got := lines(buf)
	if len(got) != 3 || !strings.Contains(got[1], "k x2 in the last 2s") || !strings.Contains(got[2], "msg=m") {
		t.Fatalf("lines:\n%s", buf)
	}
}

// TestKeysAreIndependent: one key's flood does not hold back another's
// lines, and a key that never repeated writes no count.
func TestKeysAreIndependent(t *testing.T) {
	t.Parallel()
	l, c, buf := newTest(t)
	l.Log(slog.LevelInfo, "a", 0, "a-line")
	l.Log(slog.LevelInfo, "a", 0, "a-line")
	l.Log(slog.LevelInfo, "b", 0, "b-line")
	c.add(time.Second)
	l.Flush(false)
	got := lines(buf)
	if len(got) != 3 || !strings.Contains(got[1], "b-line") || !strings.Contains(got[2], "a x1") {
		t.Fatalf("lines:\n%s", buf)
	}
}

// TestRunFlushesAtEnd: Run writes held-back counts when its context ends,
// even inside the interval.
func TestRunFlushesAtEnd(t *testing.T) {
	t.Parallel()
	l, _, buf := newTest(t)
	l.Log(slog.LevelInfo, "k", 0, "m")
	l.Log(slog.LevelInfo, "k", 0, "m")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l.Run(ctx)
	if got := lines(buf); len(got) != 2 || !strings.Contains(got[1], "k x1") {
		t.Fatalf("lines:\n%s", buf)
	}
}

// TestConcurrentUse: occurrences from several goroutines are all counted
// (run with -race).
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	l, _, buf := newTest(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				l.Log(slog.LevelInfo, "k", 1, "m")
			}
		}()
	}
	wg.Wait()
	l.Flush(true)
	if got := lines(buf); len(got) != 2 || !strings.Contains(got[1], "suppressed=7999") {
		t.Fatalf("lines:\n%s", buf)
	}
}
