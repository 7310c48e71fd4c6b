package xdp

import (
	"testing"
	"time"
)

// A retired slot is handed out again only after the quarantine, even when
// that means waiting; a slot never seen by a program is reused at once.
func TestSlotPoolQuarantine(t *testing.T) {
	now := time.Unix(0, 0)
	var slept time.Duration
	p := newSlotPool(0, 2)
	p.now = func() time.Time { return now }
	p.sleep = func(d time.Duration) { slept += d; now = now.Add(d) }

	a, _ := p.get()
	b, _ := p.get()
	if a != 0 || b != 1 {
		t.Fatalf("slots %d %d, want 0 1 (lowest first)", a, b)
	}
	if _, err := p.get(); err != errNoSlot {
		t.Fatalf("empty pool: %v", err)
	}
	p.retire(a)
	now = now.Add(quarantine / 2)
	s, err := p.get()
	if err != nil || s != a || slept != quarantine/2 {
		t.Fatalf("got slot %d (%v) after sleeping %v; want %d after %v", s, err, slept, a, quarantine/2)
	}
	p.put(b)
	if s, _ := p.get(); s != b || slept != quarantine/2 {
		t.Fatalf("put slot not reused at once: %d, slept %v", s, slept)
	}
}
