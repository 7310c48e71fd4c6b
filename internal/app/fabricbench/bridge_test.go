package fabricbench

import (
	"math"
	"testing"
	"time"

	"github.com/dxpu/dxpu/emu/topo"
)

// TestBridgePairBandwidth runs the copy benchmarks through real bridge
// pairs: the H2D rate still follows the tag limit, and 10-bit tags recover
// what 8-bit tags lose at long RTTs.
func TestBridgePairBandwidth(t *testing.T) {
	const size = 8 << 20
	for _, rtt := range []time.Duration{2 * time.Microsecond, 20 * time.Microsecond} {
		var rates [2]float64
		for i, ten := range []bool{false, true} {
			f := topo.Fabric{RTT: rtt, BytesPerSec: 200e9 / 8}
			e, err := NewEnv(Setup{Fabric: &f, TenBitTags: ten, Bridge: true})
			if err != nil {
				t.Fatal(err)
			}
			rt, err := e.DMAReadRTT(512)
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
			link := f.BytesPerSec * 256 / float64(256+12+32) // 256-byte completions, 3-DW header, framing share
			bound := math.Min(link, tags*512/rt.Seconds())
			t.Logf("bridge pair rtt %v (read %v) tags %.0f: H2D %.2f GB/s, formula %.2f GB/s", rtt, rt, tags, bw/1e9, bound/1e9)
			if math.Abs(bw-bound)/bound > 0.10 {
				t.Errorf("rtt %v tags %.0f: %.2f GB/s, want %.2f within 10%%", rtt, tags, bw/1e9, bound/1e9)
			}
			d2h, _, err := e.CopyBandwidth(D2H, size)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("  D2H %.2f GB/s", d2h/1e9)
			rates[i] = bw
		}
		if rtt >= 20*time.Microsecond && rates[1] < 1.5*rates[0] {
			t.Errorf("rtt %v: no recovery with 10-bit tags through the bridge: %.2f vs %.2f GB/s", rtt, rates[1]/1e9, rates[0]/1e9)
		}
	}
}
