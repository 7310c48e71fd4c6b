package driver_test

import (
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/tlp"
)

// A runner with Spin polls after the frames it took instead of waiting
// for the next: over a burst of writes, spaced closer than Spin, the
// GPU side's Run never waits for readability once it has frames (and
// every write arrives once, in order); without Spin it waits between
// them.
func TestRunnerSpins(t *testing.T) {
	for _, c := range []struct {
		spin      time.Duration
		wantWaits bool
	}{{10 * time.Second, false}, {0, true}} {
		a, b := newPollPipes()
		rs := pollRunnersOn(t, testConfig, a, b)
		rs[1].Spin = c.spin
		var mu sync.Mutex
		var got []uint64
		rs[1].OnTLP = func(v tlp.View) {
			mu.Lock()
			got = append(got, binary.BigEndian.Uint64(v.Payload()))
			mu.Unlock()
		}
		ctx, stop := runUp(t, rs)
		const n = 50
		before := b.waits.Load()
		data := make([]byte, 64)
		for i := range n {
			binary.BigEndian.PutUint64(data, uint64(i))
			p := tlp.Packet{Kind: tlp.MWr, Addr64: true, FirstBE: 0xf, LastBE: 0xf, Address: base + uint64(i)*64, Data: data}
			raw, err := p.AppendTo(nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := driver.SendWait(ctx, rs[0], raw); err != nil {
				t.Fatal(err)
			}
			// Let the GPU side take it and find the socket empty.
			waitfor.Until(t, "write delivered", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == i+1 })
		}
		waits := b.waits.Load() - before
		stop()
		for i, w := range got {
			if w != uint64(i) {
				t.Fatalf("spin %v: delivery %d is write %d", c.spin, i, w)
			}
		}
		if c.wantWaits && waits == 0 {
			t.Errorf("spin %v: Run never waited for readability over %d writes one at a time", c.spin, n)
		}
		if !c.wantWaits && waits != 0 {
			t.Errorf("spin %v: Run waited for readability %d times over %d writes spaced well within the spin", c.spin, waits, n)
		}
	}
}
