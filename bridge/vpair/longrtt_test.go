package vpair_test

import (
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge/vpair"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// TestTailLossBeyondMaxRTO: over a round trip longer than the bridge's
// largest retransmission timeout (30 ms against MaxRTO's default 20 ms),
// a lost last TLP, which no later frame reveals, is resent once an RTO
// probe is answered. Each RTO sends a new probe before the answer to the
// last one is back; answers matched against the newest probe only never
// matched, and the write was never delivered.
func TestTailLossBeyondMaxRTO(t *testing.T) {
	t.Parallel()
	s := sim.New(1)
	p, err := vpair.NewPair(s, vpair.PairConfig{Delay: 15 * time.Millisecond, Bandwidth: 100e9})
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	p.GPU.OnTLP = func(v tlp.View) { got = append(got, v.Address()) }
	s.Run(200 * time.Millisecond)
	if !p.Up() {
		t.Fatal("the pair did not come up")
	}
	w := tlp.Packet{Kind: tlp.MWr, Addr64: true, FirstBE: 0xf, LastBE: 0xf, Address: 0x10_0000_0000, Data: make([]byte, 64)}
	b, _ := w.AppendTo(nil)
	p.H2G.SetDown(true) // the frame carrying it is lost
	if err := p.Host.Send(b); err != nil {
		t.Fatal(err)
	}
	s.Run(s.Now() + time.Microsecond)
	p.H2G.SetDown(false)
	s.Run(s.Now() + 2*time.Second)
	c := p.Host.Bridge.Counters()
	if len(got) != 1 || got[0] != w.Address || c.Retransmits == 0 {
		t.Fatalf("delivered %#x after 2 s (RTOs %d, retransmits %d, keepalives %d): want the lost write once, resent",
			got, c.RTOs, c.Retransmits, c.KeepalivesSent)
	}
	if !p.Up() {
		t.Fatal("the pair went down")
	}
}
