package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// modelTrace is a small bundled trace for command-level model tests.
const modelTrace = "../../testdata/emu/mlp-train-emu.json.gz"

// TestLinkRateOldSpellingsEverywhere: `dxpu help units` promises that
// --gbit and --bw are --link-gbps: every command with --link-gbps has
// both, hidden, and each sets the rate with the same plain Gbit/s number
// (--bw also with a unit, as model's and bench link's once did), after a
// warning on stderr.
func TestLinkRateOldSpellingsEverywhere(t *testing.T) {
	t.Parallel()
	root := newRootCmd(newEnv(strings.NewReader(""), &strings.Builder{}, &strings.Builder{}, nil, noEnv))
	n := 0
	for _, c := range allCommands(root) {
		if c.Flags().Lookup("link-gbps") == nil {
			continue
		}
		n++
		for _, old := range []string{"gbit", "bw"} {
			if f := c.Flags().Lookup(old); f == nil || !f.Hidden || len(f.Annotations[deprecatedFor]) != 1 {
				t.Errorf("%s has --link-gbps but no hidden deprecated --%s", c.CommandPath(), old)
			}
		}
	}
	if n < 4 {
		t.Errorf("--link-gbps on %d commands, want bench fabric, bench link, demo and model", n)
	}
	type linkJSON struct {
		LinkGbps float64 `json:"link_gbps"`
		Faults   struct {
			LinkGbps float64 `json:"link_gbps"`
		} `json:"faults"`
	}
	for _, tc := range []struct {
		args []string
		want float64
	}{
		{[]string{"model", "--json", modelTrace, "--gbit", "50"}, 50},
		{[]string{"model", "--json", modelTrace, "--bw", "50"}, 50},
		{[]string{"model", "--json", modelTrace, "--bw", "12.5GB/s"}, 100},
		{[]string{"bench", "fabric", "--json", "--sizes", "4K", "--gbit", "50"}, 50},
		{[]string{"bench", "fabric", "--json", "--sizes", "4K", "--bw", "100Gbit"}, 100},
		{[]string{"bench", "link", "--virtual", "--json", "--duration", "100us", "--gbit", "10"}, 10},
		{[]string{"bench", "link", "--virtual", "--json", "--duration", "100us", "--bw", "10"}, 10},
	} {
		out, errText, err := runDxpu(t, "", tc.args...)
		old := tc.args[len(tc.args)-2]
		var r linkJSON
		if err != nil || json.Unmarshal([]byte(out), &r) != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if got := max(r.LinkGbps, r.Faults.LinkGbps); got != tc.want {
			t.Errorf("%v: link_gbps %v, want %v", tc.args, got, tc.want)
		}
		if !strings.Contains(errText, "dxpu: "+old+" is deprecated: use --link-gbps") {
			t.Errorf("%v: no deprecation warning on stderr: %q", tc.args, errText)
		}
	}
	// demo parses its aliases into --link-gbps's variable: 0 is refused by
	// its own check of the rate, not by the flag parser.
	for _, old := range []string{"--gbit", "--bw"} {
		if _, _, err := runDxpu(t, "", "demo", old, "0"); err == nil || !strings.Contains(err.Error(), "--link-gbps 0: want a number of Gbit/s above 0") {
			t.Errorf("demo %s 0: %v", old, err)
		}
	}
}

// TestModelUsageErrors: bad model and bench fabric flags get exit status
// 2, one line on stderr (after any deprecation notice) naming the flag
// the user typed, its value and what is wanted, and nothing on stdout.
func TestModelUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--link-gbps", "NaN"}, "dxpu: --link-gbps NaN: want a number of Gbit/s from 0 (no limit) up to 10000"},
		{[]string{"--link-gbps", "-Inf"}, "--link-gbps -Inf: want a number of Gbit/s"},
		{[]string{"--gbit", "NaN"}, `invalid argument "NaN" for "--gbit" flag: want a number of Gbit/s, 0 or more`},
		{[]string{"--bw", "-2"}, `invalid argument "-2" for "--bw" flag: want a number of Gbit/s, 0 or more`},
		{[]string{"--bw", "fast"}, `invalid argument "fast" for "--bw" flag: want a number of Gbit/s such as 100, or a rate with its unit`},
		{[]string{"--gbit", "20000"}, "--gbit 20000: want a number of Gbit/s from 0 (no limit) up to 10000"},
		{[]string{"--link-gbps", "5", "--bw", "5"}, "--link-gbps and --bw: one link rate given twice"},
		{[]string{"--rtt", "1000h"}, "--rtt 1000h0m0s: want at most 1s"},
		{[]string{"--rtt", "-5us"}, "dxpu: --rtt -5us: must not be negative"},
		{[]string{"--added-rtt", "-5us"}, "dxpu: --added-rtt -5us: must not be negative"},
		{[]string{"--added-rtt", "2s"}, "--added-rtt 2s: want at most 1s"},
		{[]string{"--sweep=2us,10s"}, "--sweep: model: RTT 10s: want 0 up to 1s"},
		{[]string{"--tags", "769"}, "--tags 769: want 1..768"},
		{[]string{"--sweep", "--plot", "/nonexistent/x.svg"}, "--plot /nonexistent/x.svg: stat /nonexistent: no such file or directory"},
		{[]string{"--markdown", "--json"}, "give --markdown or --json, not both"},
		{[]string{"--markdown", "--rtt", "5us"}, "--rtt does not apply"},
		{[]string{"--markdown", "--validate", "--target", "5%"}, "--target does not apply"},
	} {
		args := append([]string{"model", "--trace", modelTrace}, tc.args...)
		checkUsageError(t, args, tc.want)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--rtt", "1000h"}, "dxpu: --rtt 1000h0m0s: want at most 1s"},
		{[]string{"--rtt", "-5us"}, "dxpu: --rtt -5us: must not be negative"},
		{[]string{"--link-gbps", "NaN"}, "--link-gbps NaN: want a number of Gbit/s from 0.001 up to 10000"},
		{[]string{"--gbit", "1", "--bw", "1"}, "--gbit and --bw: one link rate given twice"},
		{[]string{"--sizes", "100G"}, `--sizes: copy size 100G: want a multiple of 4 in 4..4GiB`}, // it said "100"
	} {
		checkUsageError(t, append([]string{"bench", "fabric", "--sizes", "4K"}, tc.args...), tc.want)
	}
	// demo took NaN (its replay then stalled) and +Inf (no limit).
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--link-gbps", "NaN"}, "dxpu: --link-gbps NaN: want a number of Gbit/s above 0, at most 10000"},
		{[]string{"--link-gbps", "+Inf"}, "dxpu: --link-gbps +Inf: want a number of Gbit/s above 0, at most 10000"},
		{[]string{"--gbit", "20000"}, "dxpu: --gbit 20000: want a number of Gbit/s above 0, at most 10000"},
		{[]string{"--rtt", "2s"}, "dxpu: --rtt 2s: want at most 1s"},
	} {
		checkUsageError(t, append([]string{"demo", "--quiet"}, tc.args...), tc.want)
	}
}

// checkUsageError runs args and wants exit status 2, want in the one
// line on stderr (deprecation notices aside), no µs, and no stdout.
func checkUsageError(t *testing.T, args []string, want string) {
	t.Helper()
	var out, errb strings.Builder
	code := run(context.Background(), newEnv(strings.NewReader(""), &out, &errb, args, noEnv))
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(errb.String()), "\n") {
		if !strings.Contains(l, "is deprecated") {
			lines = append(lines, l)
		}
	}
	if code != 2 || out.Len() > 0 || len(lines) != 1 || !strings.Contains(lines[0], want) || strings.Contains(errb.String(), "µ") {
		t.Errorf("dxpu %v: exit %d, stdout %d bytes, stderr %q; want 2, none, one line with %q", args, code, out.Len(), errb.String(), want)
	}
}

// TestModelAndBenchFabricJSONUnits: the read-request size is mrrs_bytes
// in both reports (no "mrrs"), model gives rtt_us beside added_rtt_us
// when --rtt was given, and bench fabric's keys carry units.
func TestModelAndBenchFabricJSONUnits(t *testing.T) {
	t.Parallel()
	out, _, err := runDxpu(t, "", "model", "--json", "--rtt", "10us", modelTrace)
	var m map[string]any
	if err != nil || json.Unmarshal([]byte(out), &m) != nil {
		t.Fatalf("model --json: %v", err)
	}
	if m["rtt_us"] != 10.0 || m["added_rtt_us"] != 11.3 || m["mrrs_bytes"] != 512.0 || m["mrrs"] != nil {
		t.Errorf("model --json: rtt_us %v added_rtt_us %v mrrs_bytes %v mrrs %v", m["rtt_us"], m["added_rtt_us"], m["mrrs_bytes"], m["mrrs"])
	}
	out, _, err = runDxpu(t, "", "bench", "fabric", "--json", "--sizes", "4K")
	var f map[string]any
	if err != nil || json.Unmarshal([]byte(out), &f) != nil {
		t.Fatalf("bench fabric --json: %v", err)
	}
	// Names, counts and a probability need no unit; "bytes" is one.
	unitless := map[string]bool{"gpu": true, "path": true, "clock": true, "tags": true, "loss": true, "h2d": true, "d2h": true,
		"native": true, "fabric": true, "bytes": true}
	unit := regexp.MustCompile(`_(us|s|gbps|bytes)$`)
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if !unitless[k] && !unit.MatchString(k) {
					t.Errorf("bench fabric --json: key %q carries no unit", k)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(f)
	if f["mrrs_bytes"] != 512.0 {
		t.Errorf("bench fabric --json: mrrs_bytes %v", f["mrrs_bytes"])
	}
	// The model reads the new key back from a profile.
	prof := filepath.Join(t.TempDir(), "fabric.json")
	if err := os.WriteFile(prof, []byte(strings.Replace(out, `"mrrs_bytes": 512`, `"mrrs_bytes": 1024`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err = runDxpu(t, "", "model", "--json", "--profile", prof, modelTrace)
	if err != nil || json.Unmarshal([]byte(out), &m) != nil || m["mrrs_bytes"] != 1024.0 {
		t.Errorf("model --profile: mrrs_bytes %v (%v)", m["mrrs_bytes"], err)
	}
}

// TestModelREADMEFigures: the README's performance-model figures are
// what the model prints: recsys-adagrad's overhead at +100 and +200 us in
// the prose, and the predicted / measured table, which --markdown
// --validate prints as it stands.
func TestModelREADMEFigures(t *testing.T) {
	t.Parallel()
	md, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	fabric := []string{"--link-gbps", "100", "--tags", "256", "--mrrs", "512"}
	m := regexp.MustCompile(`recsys-adagrad:\s+([0-9.]+) % at\s+\+100 us,\s+([0-9.]+) % at\s+\+200 us`).FindStringSubmatch(string(md))
	if m == nil {
		t.Fatal("the README gives no recsys-adagrad overhead at +100 and +200 us")
	}
	out, _, err := runDxpu(t, "", append([]string{"model", "--markdown", "--sweep=100us,200us",
		filepath.Join(repoRoot, "testdata/traces/recsys-adagrad-a100.json.gz")}, fabric...)...)
	if row := "| " + m[1] + " % | " + m[2] + " % |"; err != nil || !strings.Contains(out, row) {
		t.Errorf("the README says recsys-adagrad %s %% at +100 us and %s %% at +200 us; the model (%v):\n%s", m[1], m[2], err, out)
	}
	traces, err := filepath.Glob(filepath.Join(repoRoot, "testdata/traces/*.json.gz"))
	if err != nil || len(traces) == 0 {
		t.Fatalf("traces: %v", err)
	}
	args := append([]string{"model", "--markdown", "--validate", "--sweep=2us,5us,10us,20us"}, fabric...)
	out, _, err = runDxpu(t, "", append(args, traces...)...)
	if err != nil {
		t.Fatal(err)
	}
	var table []string
	lines := strings.Split(string(md), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "| trace | +2 us |") {
			for _, row := range lines[i:] {
				if !strings.HasPrefix(row, "|") {
					break
				}
				table = append(table, row)
			}
			break
		}
	}
	if got := strings.Split(strings.TrimSpace(out), "\n"); len(table) < 7 || strings.Join(got, "\n") != strings.Join(table, "\n") {
		t.Errorf("--markdown --validate printed\n%s\nthe README shows\n%s", out, strings.Join(table, "\n"))
	}
	// Where model and emulator part: recsys-ddp at 25 Gbit/s, the first
	// and last predicted figure and the one measured at every RTT.
	m = regexp.MustCompile("at `--link-gbps 25` ([0-9.]+) % predicted at\\s+\\+2 us to ([0-9.]+) % at\\s+\\+20 us, ([0-9.]+) %\\s+measured at each").
		FindStringSubmatch(string(md))
	if m == nil {
		t.Fatal("the README gives no recsys-ddp figures at --link-gbps 25")
	}
	args = []string{"model", "--markdown", "--validate", "--sweep=2us,5us,10us,20us", "--link-gbps", "25", "--tags", "256", "--mrrs", "512",
		filepath.Join(repoRoot, "testdata/traces/recsys-ddp-a100-rank0.json.gz")}
	out, _, err = runDxpu(t, "", args...)
	row := regexp.MustCompile(`(?m)^\| recsys-ddp-a100-rank0 \| ([0-9.]+) / ([0-9.]+) \| [0-9.]+ / ([0-9.]+) \| [0-9.]+ / ([0-9.]+) \| ([0-9.]+) / ([0-9.]+) \|$`).FindStringSubmatch(out)
	if err != nil || row == nil || row[1] != m[1] || row[5] != m[2] || !slices.Equal([]string{row[2], row[3], row[4], row[6]}, []string{m[3], m[3], m[3], m[3]}) {
		t.Errorf("the README says recsys-ddp at 25 Gbit/s: %s %% predicted at +2 us, %s %% at +20 us, %s %% measured at each; the model (%v):\n%s",
			m[1], m[2], m[3], err, out)
	}
}
