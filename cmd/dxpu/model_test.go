package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const tinyTrace = `{"traceEvents":[
{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":200},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":0,"dur":5,"args":{"correlation":1}},
{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":10,"dur":100,"args":{"device":0,"stream":7,"correlation":1}},
{"ph":"X","cat":"cuda_runtime","name":"cudaStreamSynchronize","pid":1,"tid":1,"ts":20,"dur":95,"args":{"correlation":2}},
{"ph":"X","cat":"cuda_sync","name":"Stream Sync","pid":0,"tid":7,"ts":21,"dur":94,"args":{"cuda_sync_kind":"Stream Sync","device":0,"stream":7,"correlation":2}}
]}`

func runModelCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newModelCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
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

func TestModelJSON(t *testing.T) {
	p := writeTrace(t, tinyTrace)
	out, err := runModelCmd(t, "--trace", p, "--rtt", "10us", "--json", "--sweep=0,10us")
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	for _, k := range []string{"baseline_s", "predicted_s", "overhead_pct", "breakdown", "budget_rtt_us", "steps", "sweep"} {
		if _, ok := r[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, out)
		}
	}
	// Launch 15 us and notification 5 us on a 115 us run.
	if got := r["predicted_s"].(float64); got < 134.99e-6 || got > 135.01e-6 {
		t.Errorf("predicted_s = %v, want 135e-6", got)
	}
	bd := r["breakdown"].(map[string]any)
	if bd["launch"].(float64) < 14.99e-6 || bd["sync"].(float64) < 4.99e-6 {
		t.Errorf("breakdown %v", bd)
	}
	if out, err := runModelCmd(t, "--trace", p, "--rtt", "0", "--json"); err != nil || !strings.Contains(out, `"overhead_pct": 0,`) {
		t.Errorf("rtt 0: %v %s", err, out)
	}
}

func TestModelTableAndPlot(t *testing.T) {
	p := writeTrace(t, tinyTrace)
	svg := filepath.Join(t.TempDir(), "o.svg")
	out, err := runModelCmd(t, "--trace", p, "--trace", p, "--plot", svg, "--sweep")
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

func TestModelErrors(t *testing.T) {
	p := writeTrace(t, tinyTrace)
	bad := writeTrace(t, tinyTrace[:100])
	var ec exitCodeError
	_, err := runModelCmd(t, "--trace", bad)
	if !errors.As(err, &ec) || ec.code != 1 || !strings.Contains(err.Error(), "byte 100") {
		t.Errorf("truncated trace: %v", err)
	}
	out, err := runModelCmd(t, "--trace", p, "--validate")
	if err != nil || !strings.Contains(out, "difference") {
		t.Errorf("--validate with the emulator: %v\n%s", err, out)
	}
	for _, args := range [][]string{{}, {"--trace", p, "--rtt", "soon"}, {"--trace", p, "--bw", "fast"}, {"--trace", p, "--plot", "x.gif"}, {"--trace", p, "--target", "0"}} {
		if _, err := runModelCmd(t, args...); !errors.As(err, &ec) || ec.code != 2 {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
	if _, err := runModelCmd(t, "--trace", filepath.Join(t.TempDir(), "missing.json")); !errors.As(err, &ec) || ec.code != 2 {
		t.Errorf("missing file: %v", err)
	}
}

func TestModelMarkdown(t *testing.T) {
	p := writeTrace(t, tinyTrace)
	out, err := runModelCmd(t, "--markdown", p, p)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], "+20 us") || !strings.HasPrefix(lines[2], "| tiny | 115.0 us |") {
		t.Fatalf("markdown:\n%s", out)
	}
}
