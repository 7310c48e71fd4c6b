package harness

import (
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge/sim"
	"github.com/dxpu/dxpu/tlp"
)

func TestSmokeLossless(t *testing.T) {
	s := sim.New(1)
	p, err := NewPair(s, PairConfig{Delay: 2 * time.Microsecond, Bandwidth: 100e9})
	if err != nil {
		t.Fatal(err)
	}
	h := NewEndpoint(p.Host, tlp.NewID(0, 0, 0), DefaultMix, 2000, 100*time.Nanosecond)
	g := NewEndpoint(p.GPU, tlp.NewID(3, 0, 0), DefaultMix, 2000, 100*time.Nanosecond)
	h.Start()
	g.Start()
	ok := s.RunWhile(func() bool {
		return !(h.Done() && g.Done() && p.Host.Bridge.Pending() == 0 && p.GPU.Bridge.Pending() == 0)
	}, 5_000_000)
	t.Logf("now %v ok %v host %+v", s.Now(), ok, p.Host.Bridge.Counters())
	t.Logf("gpu %+v", p.GPU.Bridge.Counters())
	t.Logf("h: sent w%d r%d completed %d failed %d extra %d bad %d | recv w%d mis %d dup %d", h.WritesSent, h.ReadsSent, h.Completed, h.Failed, h.ExtraCpls, h.BadCpls, h.WritesRecv, h.Misordered, h.Duplicated)
	t.Logf("g: sent w%d r%d completed %d failed %d extra %d bad %d | recv w%d mis %d dup %d", g.WritesSent, g.ReadsSent, g.Completed, g.Failed, g.ExtraCpls, g.BadCpls, g.WritesRecv, g.Misordered, g.Duplicated)
	if !ok {
		t.Fatal("did not finish")
	}
}
