package xdp

import (
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/switchtest"
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

// A slot retired a moment ago stays out of use while free ones remain.
func TestSlotPoolKeepsRetiredWhileFreeRemain(t *testing.T) {
	now := time.Unix(0, 0)
	p := newSlotPool(0, 3)
	p.now = func() time.Time { return now }
	p.sleep = func(d time.Duration) { now = now.Add(d) }
	a, _ := p.get()
	p.get()
	p.retire(a)
	if s, err := p.get(); err != nil || s == a {
		t.Fatalf("got slot %d (%v) with slot %d just retired and slot 2 free; want 2", s, err, a)
	}
	now = now.Add(quarantine)
	if s, err := p.get(); err != nil || s != a {
		t.Fatalf("after the quarantine: slot %d (%v), want %d", s, err, a)
	}
}

// A removed pair's rule slot is not handed to the pair added in its place
// before the quarantine: a program run may still read it.
func TestRemovedPairSlotQuarantined(t *testing.T) {
	privtest.BPF(t)
	privtest.NetNS(t)
	sb, err := NewSandbox([]PortSpec{{Name: "h", MAC: switchtest.MAC(9, 1)}, {Name: "g", MAC: switchtest.MAC(9, 2)}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	pair := func(id uint32) *table.Table {
		return &table.Table{Version: uint64(id), Pairs: []table.Pair{{ID: id,
			Host: table.Endpoint{Port: "h", MAC: switchtest.MAC(1, 1)}, GPU: table.Endpoint{Port: "g", MAC: switchtest.MAC(2, 1)}}}}
	}
	err = sb.Do(func() error {
		s, err := Load(Options{MaxPairs: 2})
		if err != nil {
			return err
		}
		defer s.Close()
		if _, err := s.Reconcile(pair(1), sb.Ports()); err != nil {
			return err
		}
		old := s.pairs[1].slot
		if _, err := s.Reconcile(pair(2), sb.Ports()); err != nil {
			return err
		}
		if got := s.pairs[2].slot; got == old {
			t.Errorf("pair 2 got slot %d, pair 1's, right after pair 1 was removed", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
