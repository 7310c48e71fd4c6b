package xdp_test

import (
	"errors"
	"testing"

	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/switchtest"
	"github.com/dxpu/dxpu/xdp"
)

// loadIn loads a switch with opts, closed when the test ends.
func loadIn(t *testing.T, opts xdp.Options) *xdp.Switch {
	t.Helper()
	sw, err := xdp.Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sw.Close() })
	return sw
}

// TestLoadMaxPairsBound: MaxMaxPairs itself loads; one more is refused.
func TestLoadMaxPairsBound(t *testing.T) {
	privtest.BPF(t)
	loadIn(t, xdp.Options{MaxPairs: xdp.MaxMaxPairs})
	if sw, err := xdp.Load(xdp.Options{MaxPairs: xdp.MaxMaxPairs + 1}); err == nil {
		sw.Close()
		t.Fatalf("MaxPairs %d loaded", xdp.MaxMaxPairs+1)
	}
}

// TestAttachTwiceThenAgain: a second Attach to the same interface is
// ErrAttached; after Detach the switch attaches there again.
func TestAttachTwiceThenAgain(t *testing.T) {
	f := newFixture(t)
	idx := int(f.ports[switchtest.P1].Index)
	err := f.ns.Do(func() error {
		if _, err := f.sw.Attach(idx); err != nil {
			return err
		}
		if _, err := f.sw.Attach(idx); !errors.Is(err, xdp.ErrAttached) {
			t.Errorf("second Attach: %v, want ErrAttached", err)
		}
		if err := f.sw.Detach(idx); err != nil {
			return err
		}
		if _, err := f.sw.Attach(idx); err != nil {
			t.Errorf("Attach after Detach: %v", err)
		}
		return f.sw.Detach(idx)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSetXSKBounds: queue 64 has no slot (it would be the next port's
// queue 0); removing a socket that is not there is no error.
func TestSetXSKBounds(t *testing.T) {
	f := newFixture(t)
	idx := int(f.ports[switchtest.P1].Index)
	if err := f.sw.SetXSK(idx, xdp.XSKQueues, -1); err == nil {
		t.Errorf("SetXSK on queue %d: no error", xdp.XSKQueues)
	}
	if err := f.sw.SetXSK(idx, xdp.XSKQueues-1, -1); err != nil {
		t.Errorf("removing the socket of queue %d (none there): %v", xdp.XSKQueues-1, err)
	}
	if err := f.sw.SetXSK(idx, 0, -1); err != nil {
		t.Errorf("removing the socket of queue 0 (none there): %v", err)
	}
}
