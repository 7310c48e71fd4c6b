package fabricbench

import (
	"math"
	"testing"
	"time"

	"github.com/dxpu/dxpu/emu/topo"
)

// TestH2DFollowsTagLimit is the acceptance check: host-to-device bandwidth
// over the fabric follows min(link, tags x MRRS / RTT) within 10% for RTTs
// from 1 to 50 us, dropping with 8-bit tags (256 outstanding reads) and
// recovering with 10-bit tags (768).
func TestH2DFollowsTagLimit(t *testing.T) {
	const size = 16 << 20
	const mrrs = 512
	fab := topo.Fabric{BytesPerSec: 200e9 / 8}
	for _, rtt := range []time.Duration{1, 2, 5, 10, 20, 50} {
		rtt *= time.Microsecond
		var rates [2]float64
		for i, ten := range []bool{false, true} {
			f := fab
			f.RTT = rtt
			e, err := NewEnv(Setup{Fabric: &f, TenBitTags: ten, MRRS: mrrs})
			if err != nil {
				t.Fatal(err)
			}
			rt, err := e.DMAReadRTT(mrrs)
			if err != nil {
				t.Fatal(err)
			}
			bw, _, err := e.CopyBandwidth(H2D, size)
			if err != nil {
				t.Fatal(err)
			}
			tags := 256.0
			if ten {
				tags = 768
			}
			lc := topo.FabricLink(f, e.W.Opts.Model)
			// Completions of 256 bytes (MPS) with a 3-DW header each.
			link := lc.BytesPerSec * 256 / float64(256+12+lc.OverheadBytes)
			want := math.Min(link, tags*mrrs/rt.Seconds())
			t.Logf("rtt %v (read round trip %v) tags %.0f: %.2f GB/s, formula %.2f GB/s", rtt, rt, tags, bw/1e9, want/1e9)
			if math.Abs(bw-want)/want > 0.10 {
				t.Errorf("rtt %v tags %.0f: %.2f GB/s, want %.2f GB/s within 10%%", rtt, tags, bw/1e9, want/1e9)
			}
			rates[i] = bw
		}
		if rtt >= 10*time.Microsecond && rates[1] < 1.5*rates[0] {
			t.Errorf("rtt %v: 10-bit tags give %.2f GB/s against %.2f with 8-bit: no recovery", rtt, rates[1]/1e9, rates[0]/1e9)
		}
	}
}

// TestFluidTailMatchesTLPs checks the abstraction that keeps long copies
// cheap: moving only the first MiB as TLPs and the rest functionally gives
// the same time as moving everything as TLPs.
func TestFluidTailMatchesTLPs(t *testing.T) {
	for _, dir := range []Direction{H2D, D2H} {
		var els [2]time.Duration
		for i, limit := range []uint64{0, 1 << 20} {
			e, err := NewEnv(Setup{Fabric: &topo.Fabric{RTT: 10 * time.Microsecond}, MaxSimBytes: limit})
			if err != nil {
				t.Fatal(err)
			}
			_, el, err := e.CopyBandwidth(dir, 24<<20)
			if err != nil {
				t.Fatal(err)
			}
			els[i] = el
			if limit > 0 && e.GPU.Stats.FluidBytes == 0 {
				t.Fatalf("%v: no bytes took the functional path", dir)
			}
		}
		if d := math.Abs(float64(els[1]-els[0])) / float64(els[0]); d > 0.03 {
			t.Errorf("%v: all TLPs %v, 1 MiB of TLPs %v: %.1f%% apart", dir, els[0], els[1], 100*d)
		}
	}
}

func TestMicrobenchmarksNativeVsFabric(t *testing.T) {
	n, err := NewEnv(Setup{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewEnv(Setup{Fabric: &topo.Fabric{RTT: 5 * time.Microsecond}})
	if err != nil {
		t.Fatal(err)
	}
	mn, _ := n.MMIOReadLatency(10)
	mf, _ := f.MMIOReadLatency(10)
	if mn > 2*time.Microsecond || mf-mn < 5*time.Microsecond {
		t.Errorf("MMIO read native %v fabric %v: want about 1us and about +5us", mn, mf)
	}
	ln, _ := n.LaunchLatency(5)
	lf, _ := f.LaunchLatency(5)
	if lf-ln < 15*time.Microsecond {
		t.Errorf("launch+sync native %v fabric %v: fabric should add >= 3 one-way trips + 2 round trips", ln, lf)
	}
	t.Logf("mmio %v/%v launch %v/%v", mn, mf, ln, lf)
}
