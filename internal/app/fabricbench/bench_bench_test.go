package fabricbench

import (
	"testing"
	"time"

	"github.com/dxpu/dxpu/emu/topo"
)

// BenchmarkH2DCopy16MiBAsTLPs moves 16 MiB host to device over the fabric,
// all of it as TLPs (32768 reads, 65536 completions).
func BenchmarkH2DCopy16MiBAsTLPs(b *testing.B) {
	e, err := NewEnv(Setup{Fabric: &topo.Fabric{RTT: 5 * time.Microsecond}, TenBitTags: true})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(16 << 20)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := e.CopyBandwidth(H2D, 16<<20); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(e.GPU.Stats.ReadRequests)/b.Elapsed().Seconds(), "reads/s")
}
