package predict

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/emu/replay"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/model"
)

const tinyTrace = `{"traceEvents":[
{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":200},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":0,"dur":5,"args":{"correlation":1}},
{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":10,"dur":100,"args":{"device":0,"stream":7,"correlation":1}},
{"ph":"X","cat":"cuda_runtime","name":"cudaStreamSynchronize","pid":1,"tid":1,"ts":20,"dur":95,"args":{"correlation":2}},
{"ph":"X","cat":"cuda_sync","name":"Stream Sync","pid":0,"tid":7,"ts":21,"dur":94,"args":{"cuda_sync_kind":"Stream Sync","device":0,"stream":7,"correlation":2}}
]}`

// opts returns the options of `dxpu model` with the flags' defaults.
func opts(traces ...string) Options {
	return Options{Traces: traces, AddedRTT: 5 * time.Microsecond, Tags: model.DefaultTags, MRRS: model.DefaultMRRS, Target: "10%",
		Measurer: replay.Measurer{}}
}

func run(t *testing.T, o Options) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := Run(context.Background(), o, &out)
	return out.String(), err
}

func writeTrace(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tiny.json")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestJSON(t *testing.T) {
	t.Parallel()
	p := writeTrace(t, tinyTrace)
	o := opts(p)
	o.AddedRTT, o.JSON, o.Sweep = 10*time.Microsecond, true, "0,10us"
	out, err := run(t, o)
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	for _, k := range []string{"baseline_s", "predicted_s", "overhead_pct", "breakdown", "budget_added_rtt_us", "steps", "sweep"} {
		if _, ok := r[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, out)
		}
	}
	// Launch 15 us and notification 5 us on a 115 us run.
	if got := r["predicted_s"].(float64); got < 134.99e-6 || got > 135.01e-6 {
		t.Errorf("predicted_s = %v, want 135e-6", got)
	}
	bd := r["breakdown"].(map[string]any)
	if bd["launch_s"].(float64) < 14.99e-6 || bd["sync_s"].(float64) < 4.99e-6 || bd["launch"] != nil {
		t.Errorf("breakdown %v", bd)
	}
	o = opts(p)
	o.AddedRTT, o.JSON = 0, true
	if out, err := run(t, o); err != nil || !strings.Contains(out, `"overhead_pct": 0,`) {
		t.Errorf("rtt 0: %v %s", err, out)
	}
}

func TestTableAndPlot(t *testing.T) {
	t.Parallel()
	p := writeTrace(t, tinyTrace)
	svg := filepath.Join(t.TempDir(), "o.svg")
	o := opts(p, p)
	o.Plot, o.Sweep = svg, "default"
	out, err := run(t, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"baseline", "predicted", "overhead", "launch", "budget", "rtt (us)", "plot written"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if b, err := os.ReadFile(svg); err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Errorf("plot: %v", err)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	p := writeTrace(t, tinyTrace)
	bad := writeTrace(t, tinyTrace[:100])
	_, err := run(t, opts(bad))
	if !errors.Is(err, apperr.ErrFailed) || !strings.Contains(err.Error(), "byte 100") {
		t.Errorf("truncated trace: %v", err)
	}
	o := opts(p)
	o.Validate = true
	out, err := run(t, o)
	if err != nil || !strings.Contains(out, "difference") {
		t.Errorf("--validate with the emulator: %v\n%s", err, out)
	}
	o.Measurer = nil
	if _, err := run(t, o); !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), "needs the emulator") {
		t.Errorf("--validate without a measurer: %v", err)
	}
	for name, mod := range map[string]func(*Options){
		"no trace": func(o *Options) { o.Traces = nil }, "--added-rtt 2s": func(o *Options) { o.AddedRTT = 2 * time.Second },
		"--link-gbps NaN": func(o *Options) { o.LinkGbps = math.NaN() }, "--plot x.gif": func(o *Options) { o.Plot = "x.gif" },
		"--target 0": func(o *Options) { o.Target = "0" }, "--target 200%": func(o *Options) { o.Target = "200%" },
		"--rtt -1us": func(o *Options) { o.NetworkRTT, o.NetworkRTTSet = -time.Microsecond, true },
	} {
		o := opts(p)
		mod(&o)
		if _, err := run(t, o); !errors.Is(err, apperr.ErrUsage) {
			t.Errorf("%s: %v, want a usage error", name, err)
		}
	}
	if _, err := run(t, opts(filepath.Join(t.TempDir(), "missing.json"))); !errors.Is(err, apperr.ErrUsage) {
		t.Errorf("missing file: %v", err)
	}
}

func TestMarkdown(t *testing.T) {
	t.Parallel()
	p := writeTrace(t, tinyTrace)
	o := opts(p, p)
	o.Markdown = true
	out, err := run(t, o)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], "+20 us") || !strings.HasPrefix(lines[2], "| tiny | 115.0 us |") {
		t.Fatalf("markdown:\n%s", out)
	}
}

// TestProfileLosesToExplicitOptions: a fabric profile sets the fabric, but
// options given explicitly win.
func TestProfileLosesToExplicitOptions(t *testing.T) {
	t.Parallel()
	p := writeTrace(t, tinyTrace)
	prof := filepath.Join(t.TempDir(), "fabric.json")
	if err := os.WriteFile(prof, []byte(`{"rtt_us":5,"added_rtt_us":7,"gbit":100,"tags":256,"mrrs":512}`), 0o644); err != nil {
		t.Fatal(err)
	}
	o := opts(p)
	o.Profile, o.JSON = prof, true
	out, err := run(t, o)
	if err != nil {
		t.Fatal(err)
	}
	var r Report
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Tags != 256 {
		t.Fatalf("profile's tags not taken: %v %s", err, out)
	}
	o.Tags, o.TagsSet = 64, true
	if out, err = run(t, o); err != nil || json.Unmarshal([]byte(out), &r) != nil || r.Tags != 64 {
		t.Fatalf("explicit --tags lost to the profile: %v %s", err, out)
	}
}

// TestNetworkRTT: --rtt is the network round trip between the bridges;
// the model re-times with it plus the bridges' fixed cost (4 x 250 ns of
// bridge latency and two 150 ns PCIe hops), so 5us becomes 6.3us added.
func TestNetworkRTT(t *testing.T) {
	t.Parallel()
	o := opts(writeTrace(t, tinyTrace))
	o.NetworkRTT, o.NetworkRTTSet, o.JSON = 5*time.Microsecond, true, true
	out, err := run(t, o)
	var r Report
	if err != nil || json.Unmarshal([]byte(out), &r) != nil || r.AddedRTTus != 6.3 {
		t.Fatalf("added_rtt_us %v (%v): %s", r.AddedRTTus, err, out)
	}
}

// TestNoBudget: when even 0 added RTT exceeds the target (the link rate,
// tags and MRRS alone), no budget exists: the text says so and the JSON
// budget is null with a reason, never "0.00 us keeps the overhead <= 10 %".
func TestNoBudget(t *testing.T) {
	t.Parallel()
	o := opts("../../../testdata/emu/mlp-train-emu.json.gz")
	o.AddedRTT, o.LinkGbps, o.Tags, o.MRRS = 10*time.Microsecond, 100, 256, 512
	out, err := run(t, o)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "budget     none: no added RTT keeps it within 10 %: at 0 added RTT the overhead is already 26.") ||
		strings.Contains(out, "0.00 us added RTT") {
		t.Errorf("text:\n%s", out)
	}
	o.JSON = true
	out, err = run(t, o)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Budget *float64 `json:"budget_added_rtt_us"`
		Reason string   `json:"budget_none_reason"`
		Zero   float64  `json:"overhead_at_zero_added_rtt_pct"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"budget_added_rtt_us": null`) || r.Reason == "" || r.Zero <= 10 {
		t.Errorf("JSON: %s", out)
	}
	// A fabric with a budget still has a number and no reason.
	o.LinkGbps, o.Tags = 0, model.DefaultTags
	out, err = run(t, o)
	if err != nil || json.Unmarshal([]byte(out), &r) != nil || r.Budget == nil || *r.Budget <= 0 ||
		strings.Contains(out, "budget_none_reason") {
		t.Errorf("budget with no link limit: %v %s", err, out)
	}
}

// TestProfileErrors: a --profile that is empty or not a JSON object says
// so with its line and column, never "EOF" or a Go type.
func TestProfileErrors(t *testing.T) {
	t.Parallel()
	p := writeTrace(t, tinyTrace)
	for body, want := range map[string]string{
		"":                  " is empty: expected the JSON object of 'dxpu bench fabric --json'",
		"[1]":               ": line 1 col 1: expected an object, found an array",
		"{\"rtt_us\": 5,\n": ": line 1 col 14: the JSON ends before its value is complete",
		// encoding/json kept the last of a key given twice and read the
		// first of two objects (third new-user trial).
		`{"rtt_us":5,"rtt_us":6}`:         `: model: fabric profile: duplicate field "rtt_us"`,
		`{"rtt_us":5}{"rtt_us":6}`:        ": model: fabric profile: data after the JSON value",
		`{"fabric":{"tags":8,"tags":16}}`: `: model: fabric profile: duplicate field "fabric.tags"`,
	} {
		o := opts(p)
		o.Profile = writeTrace(t, body)
		_, err := run(t, o)
		if !errors.Is(err, apperr.ErrFailed) || !strings.Contains(err.Error(), o.Profile+want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
}
