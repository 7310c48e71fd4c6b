package replay

import (
	"context"
	"testing"
	"time"

	"github.com/dxpu/dxpu/emu/topo"
)

// BenchmarkReplayAlexnetFabric replays the alexnet trace over the fabric:
// a whole run (world build, enumeration, 459 nodes, 244 MB of copies) per
// iteration. Events/s is the simulator's throughput.
func BenchmarkReplayAlexnetFabric(b *testing.B) {
	g := loadGraph(b, "alexnet-forward-a100.json.gz")
	if _, err := Calibrate(Options{}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var events uint64
	for i := 0; i < b.N; i++ {
		res, err := Run(context.Background(), g, Options{Fabric: &topo.Fabric{RTT: 10 * time.Microsecond}})
		if err != nil {
			b.Fatal(err)
		}
		events += res.Events
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}
