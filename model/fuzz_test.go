package model

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/model/trace"
)

// FuzzModel runs arbitrary input through the whole pipeline: whatever the
// decoder accepts, the graph must reproduce natively, keep its schedule
// ordered, and never predict less than the baseline.
func FuzzModel(f *testing.F) {
	f.Add([]byte(`[{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":0,"dur":5,"args":{"correlation":1}},
{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":10,"dur":100,"args":{"stream":7,"correlation":1}},
{"ph":"X","cat":"cuda_runtime","name":"cudaStreamSynchronize","pid":1,"tid":1,"ts":20,"dur":95,"args":{"correlation":2}},
{"ph":"X","cat":"cuda_sync","name":"Stream Sync","pid":0,"tid":7,"ts":21,"dur":1,"args":{"cuda_sync_kind":"Stream Sync","stream":7,"correlation":2}}]`))
	f.Add([]byte(`[{"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD (Pageable -> Device)","pid":0,"tid":7,"ts":1,"dur":3,"args":{"stream":7,"correlation":4,"bytes":1000000}},
{"ph":"X","cat":"cuda_runtime","name":"cudaMemcpy","pid":1,"tid":1,"ts":0,"dur":5,"args":{"correlation":4}}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := trace.Decode(bytes.NewReader(data))
		if err != nil {
			return
		}
		g, err := Build(w)
		if err != nil {
			return
		}
		checkGraph(t, g)
		for _, rtt := range []time.Duration{time.Microsecond, 20 * time.Microsecond} {
			p := g.Predict(Fabric{RTT: rtt, Bandwidth: 12.5e9, Tags: 256, MRRS: 512})
			if p.Predicted < p.Baseline || math.IsNaN(p.OverheadPct) {
				t.Fatalf("RTT %v: predicted %v, baseline %v, overhead %v", rtt, p.Predicted, p.Baseline, p.OverheadPct)
			}
		}
	})
}

// FuzzFabricFromProfile checks that any profile accepted yields a fabric
// that passes Validate, and that bad profiles leave the base untouched.
func FuzzFabricFromProfile(f *testing.F) {
	f.Add(`{"rtt_us": 5, "bandwidth_gbps": 100, "tags": 768, "mrrs": 1024}`)
	f.Add(`{"mmio_read_us": {"native": 0.9, "fabric": 10.9}}`)
	f.Add(`{"fabric": {"rtt_us": -1}}`)
	f.Fuzz(func(t *testing.T, in string) {
		got, err := FabricFromProfile(strings.NewReader(in), Native)
		if err != nil {
			if got != Native {
				t.Fatalf("error %v but fabric changed to %+v", err, got)
			}
			return
		}
		if verr := got.Validate(); verr != nil {
			t.Fatalf("accepted profile gives invalid fabric %+v: %v", got, verr)
		}
	})
}

// FuzzParseFlags checks the flag parsers: accepted values are finite and
// not negative.
func FuzzParseFlags(f *testing.F) {
	for _, s := range []string{"100Gbit", "12.5GB/s", "5us", "10%", "0", "1e309Gbit", "NaN"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if bw, err := ParseBandwidth(s); err == nil && (bw < 0 || math.IsNaN(bw) || math.IsInf(bw, 0)) {
			t.Fatalf("ParseBandwidth(%q) = %v", s, bw)
		}
		if d, err := ParseRTT(s); err == nil && d < 0 {
			t.Fatalf("ParseRTT(%q) = %v", s, d)
		}
		if p, err := ParsePercent(s); err == nil && (p <= 0 || math.IsNaN(p) || math.IsInf(p, 0)) {
			t.Fatalf("ParsePercent(%q) = %v", s, p)
		}
	})
}
