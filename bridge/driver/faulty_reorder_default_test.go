package driver

import (
	"net"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge/memlink"
)

// discard is a Transport that sends nowhere.
type discard struct{}

func (discard) Send([]byte) error        { return nil }
func (discard) Recv([]byte) (int, error) { return 0, net.ErrClosed }
func (discard) Close() error             { return nil }

// TestFaultyReorderDelayDefault: the real-time Faulty holds a reordered
// frame back, by default, as long as the virtual-time memlink.Link does
// and memlink.Faults documents, Delay + 5 us (memlink.ReorderSlack): it
// used Delay + 20 us, so the same --reorder meant another hold on real
// time than in virtual time.
func TestFaultyReorderDelayDefault(t *testing.T) {
	t.Parallel()
	for _, delay := range []time.Duration{0, 30 * time.Microsecond} {
		faults := memlink.Faults{Reorder: 1, Delay: delay}
		f := NewFaulty(discard{}, faults, 1)
		got := f.dice.F.ReorderDelay
		f.Close()
		if want := faults.WithDefaults().ReorderDelay; got != want || got != delay+5*time.Microsecond {
			t.Errorf("Delay %v: Faulty holds a reordered frame up to %v, memlink.Link %v; want both %v", delay, got, want, delay+5*time.Microsecond)
		}
	}
	if f := NewFaulty(discard{}, memlink.Faults{Reorder: 1, ReorderDelay: time.Millisecond}, 1); f.dice.F.ReorderDelay != time.Millisecond {
		t.Errorf("ReorderDelay 1ms became %v", f.dice.F.ReorderDelay)
	}
}
