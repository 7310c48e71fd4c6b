package pairsim

import (
	"github.com/dxpu/dxpu/bridge/vpair"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge/memlink"
)

// On a clean link nothing is ever sent twice: no retransmission, no NAK,
// no timeout, and both directions deliver everything.
func TestLosslessNoRetransmissions(t *testing.T) {
	sc := Scenario{Seed: 1, Faults: memlink.Faults{Delay: 2 * time.Microsecond, Bandwidth: 100e9}, Count: 2000, Interval: 100 * time.Nanosecond}
	r := sc.Run()
	if len(r.Violations) > 0 {
		t.Fatal(r)
	}
	for _, sd := range []*vpair.Side{r.Pair.Host, r.Pair.GPU} {
		c := sd.Bridge.Counters()
		if c.Retransmits != 0 || c.NaksSent != 0 || c.RTOs != 0 || c.Duplicates != 0 || c.FramesDropped != 0 {
			t.Fatalf("%s side: %+v", sd.Name, c)
		}
		if c.TLPsDelivered == 0 {
			t.Fatalf("%s side delivered nothing", sd.Name)
		}
	}
	if r.Host.WritesSent != r.GPU.WritesRecv || r.GPU.WritesSent != r.Host.WritesRecv {
		t.Fatalf("writes: %v", r)
	}
}
