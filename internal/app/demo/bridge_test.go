package demo

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/model"
	"github.com/dxpu/dxpu/model/trace"
)

// TestRunOneBridgeStats: with Bridge, a fabric run (bundled or replayed
// trace) says what its bridge pairs carried, and the TLPs did cross them;
// without it, or natively, there are no bridge figures.
func TestRunOneBridgeStats(t *testing.T) {
	t.Parallel()
	plan := &hostPlan{id: "host-a", rtt: 3 * time.Microsecond}
	bert := BundledWorkloads()[1]
	w, err := trace.Decode(strings.NewReader(`{"traceEvents":[
{"ph":"X","cat":"cuda_runtime","name":"cudaMemcpy","pid":1,"tid":1,"ts":0,"dur":40,"args":{"correlation":4}},
{"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD (Pinned -> Device)","pid":0,"tid":7,"ts":1,"dur":30,"args":{"device":0,"stream":7,"correlation":4,"bytes":65536}}
]}`))
	if err != nil {
		t.Fatal(err)
	}
	g, err := model.Build(w)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range []*job{{name: bert.Name, plan: plan, gpus: 1, bundle: &bert}, {name: "copy (trace)", plan: plan, gpus: 1, graph: g}} {
		cfg := &Config{BytesPerSec: 100e9 / 8, Bridge: true}
		_, bs, err := runOne(context.Background(), cfg, j, true)
		if err != nil {
			t.Fatalf("%s: %v", j.name, err)
		}
		if bs == nil || bs.Pairs != 1 || bs.TLPs == 0 || bs.Frames == 0 || bs.Bytes <= bs.PayloadBytes || bs.PayloadBytes == 0 {
			t.Errorf("%s: bridge stats %+v, want one pair that carried TLPs", j.name, bs)
		}
		if _, bs, err := runOne(context.Background(), cfg, j, false); err != nil || bs != nil {
			t.Errorf("%s native: %+v %v, want no bridge stats", j.name, bs, err)
		}
		cfg.Bridge = false
		if _, bs, err := runOne(context.Background(), cfg, j, true); err != nil || bs != nil {
			t.Errorf("%s without --bridge: %+v %v, want no bridge stats", j.name, bs, err)
		}
	}
}

// TestWriteBridgeTable: with bridge figures, the text has a table of them
// per workload and the JSON a "bridge" object; without, neither.
func TestWriteBridgeTable(t *testing.T) {
	t.Parallel()
	rep := &Report{Rows: []Row{{Workload: "mlp", Host: "host-a", GPUs: 1, NativeS: 1, FabricS: 2,
		Bridge: &BridgeStats{Pairs: 1, TLPs: 250209, Frames: 348254, Bytes: 57 << 20, PayloadBytes: 40 << 20, Retransmits: 3}}}}
	var out strings.Builder
	rep.WriteTables(&out)
	for _, want := range []string{"bridge pairs of the fabric runs", "workload  pairs    TLPs  frames  MiB on links  payload MiB  retransmits  link downs",
		"mlp      1  250209  348254          57.0         40.0            3           0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("tables lack %q:\n%s", want, out.String())
		}
	}
	b, _ := json.Marshal(rep.Rows[0])
	if !strings.Contains(string(b), `"bridge":{"pairs":1,"tlps":250209,"frames":348254,"bytes":59768832,"payload_bytes":41943040,"retransmits":3,"link_downs":0}`) {
		t.Errorf("JSON %s", b)
	}
	rep.Rows[0].Bridge = nil
	out.Reset()
	rep.WriteTables(&out)
	if b, _ := json.Marshal(rep.Rows[0]); strings.Contains(out.String(), "bridge pairs") || strings.Contains(string(b), "bridge") {
		t.Errorf("no bridge figures, yet:\n%s\n%s", out.String(), b)
	}
}
