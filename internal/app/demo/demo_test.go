package demo

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestDemoWithoutTraces(t *testing.T) {
	var log strings.Builder
	rep, err := Run(context.Background(), Config{Log: &log, RTT: 5 * time.Microsecond, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Hosts) != 4 {
		t.Fatalf("%d hosts", len(rep.Hosts))
	}
	want := []int{1, 2, 4, 8}
	for i, h := range rep.Hosts {
		if h.Enumerated != want[i] || len(h.GPUs) != want[i] || !h.ConfigSame {
			t.Fatalf("host %s: asked %d, enumerated %d, GPUs %v, config identical %v", h.Host, h.Asked, h.Enumerated, h.GPUs, h.ConfigSame)
		}
	}
	// No GPU lent twice.
	seen := map[string]string{}
	for _, h := range rep.Hosts {
		for _, g := range h.GPUs {
			if o, dup := seen[g]; dup {
				t.Fatalf("%s lent to %s and %s", g, o, h.Host)
			}
			seen[g] = h.Host
		}
	}
	if len(rep.Rows) != len(BundledWorkloads()) {
		t.Fatalf("%d rows", len(rep.Rows))
	}
	for _, r := range rep.Rows {
		if r.NativeS <= 0 || r.FabricS < r.NativeS {
			t.Errorf("%s: native %v fabric %v", r.Workload, r.NativeS, r.FabricS)
		}
	}
	if !strings.Contains(strings.Join(rep.Notes, "\n"), "traces skipped") {
		t.Errorf("missing traces not noted: %v", rep.Notes)
	}
	if !strings.Contains(strings.Join(rep.Notes, "\n"), "surprise removal (1 device gone); its other 7 GPUs still answer") {
		t.Errorf("GPU failure not handled as expected: %v", rep.Notes)
	}
	if !strings.Contains(strings.Join(rep.Notes, "\n"), "1 GPU hot-removed from its bridge; the pool has 2 free GPUs") {
		t.Errorf("release not handled as expected: %v", rep.Notes)
	}
	if !strings.Contains(log.String(), "refused") {
		t.Errorf("the over-large request was not refused: %s", log.String())
	}
}
