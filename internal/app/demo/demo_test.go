package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/app/apperr"
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
	if !strings.Contains(strings.Join(rep.Notes, "\n"), "run unkeyed") {
		t.Errorf("the demo does not say its pairs are unkeyed: %v", rep.Notes)
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

// TestPresentJSON: `dxpu demo --json` prints JSON lines, one object per
// workload, and nothing on stderr with --quiet. It runs with --rtt 0,
// which must mean 0 (it fell back to the per-rack 3 and 6 us): every
// workload's added RTT is the bridges' 1.3 us alone.
func TestPresentJSON(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	err := Present(context.Background(), Options{Config: Config{BytesPerSec: 100e9 / 8, TracesDir: t.TempDir(), Workers: 2, RTTSet: true}, JSON: true, Quiet: true}, &out, &errb)
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	for i, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("demo --json line %d is not one JSON object: %v\n%s", i+1, err, line)
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		t.Fatal("no workloads")
	}
	for _, r := range rows {
		for _, k := range []string{"workload", "native_s", "fabric_s", "overhead_pct", "added_rtt_us"} {
			if _, ok := r[k]; !ok {
				t.Fatalf("row %v lacks %q", r, k)
			}
		}
		if r["added_rtt_us"] != 1.3 {
			t.Errorf("%v: added_rtt_us %v with --rtt 0, want the bridges' 1.3", r["workload"], r["added_rtt_us"])
		}
	}
	if errb.Len() != 0 {
		t.Errorf("--quiet printed on stderr: %q", errb.String())
	}
}

func TestPresentBadOptions(t *testing.T) {
	t.Parallel()
	for _, o := range []Options{
		{Config: Config{BytesPerSec: 0}},
		{Config: Config{BytesPerSec: 1, RTT: -time.Microsecond}},
		{Config: Config{BytesPerSec: 1, TracesDir: "/nonexistent/traces"}},
	} {
		if err := Present(context.Background(), o, io.Discard, io.Discard); !errors.Is(err, apperr.ErrUsage) {
			t.Errorf("%+v: %v, want a usage error", o, err)
		}
	}
}

// TestWriteTables: the tables carry every host and workload, and the
// figures in the units the demo prints.
func TestWriteTables(t *testing.T) {
	t.Parallel()
	pct := 1.5
	rep := &Report{
		Hosts: []HostSummary{{Host: "host-a", Asked: 4, Enumerated: 4, RTTus: 3, ConfigSame: true, GPUs: []string{"g0", "g1", "g2", "g3"}}},
		Rows:  []Row{{Workload: "mlp", Host: "host-a", GPUs: 1, AddedRTTus: 5, NativeS: 0.0025, FabricS: 1.25, OverheadPct: 2.25, ModelPct: &pct}},
		Notes: []string{"a note"},
	}
	var out strings.Builder
	rep.WriteTables(&out)
	for _, want := range []string{"host-a  4      4           3us      identical     [g0 g1 ... g3]", "2.500ms", "1.2500s", "2.25%", "1.50%", "note: a note"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("tables lack %q:\n%s", want, out.String())
		}
	}
}

// TestDefaultTraces: without --traces the demo takes the traces committed
// in the repository's testdata/traces, and says so; a directory without
// traces is named in the note too.
func TestDefaultTraces(t *testing.T) {
	t.Parallel()
	dir, err := DefaultTracesDir()
	if err != nil || !strings.HasSuffix(dir, "/testdata/traces") {
		t.Fatalf("DefaultTracesDir = %q, %v", dir, err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.json.gz")); len(m) < 5 {
		t.Fatalf("%s holds %d traces, want the 5 the README shows", dir, len(m))
	}
	empty := t.TempDir()
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{TracesDir: empty}, "traces skipped: no *.json.gz in " + empty},
		{Config{TracesMissing: "no dxpu checkout (looked above /x)"}, "traces skipped: no dxpu checkout (looked above /x)"},
		{Config{}, "traces skipped: no traces directory given"},
	} {
		c.cfg.RTT, c.cfg.Workers = 5*time.Microsecond, 2
		rep, err := Run(context.Background(), c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(rep.Notes, c.want) {
			t.Errorf("notes %q lack %q", rep.Notes, c.want)
		}
	}
}
