package predict

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/model"
)

// TestValidateFollowsSweep: --validate compares at the --sweep RTTs, in
// text and JSON, not at its own 2, 5, 10, 20 us.
func TestValidateFollowsSweep(t *testing.T) {
	t.Parallel()
	o := opts(writeTrace(t, tinyTrace))
	o.Validate, o.Sweep, o.JSON = true, "2us", true
	out, err := run(t, o)
	var r Report
	if err != nil || json.Unmarshal([]byte(out), &r) != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(r.Validation) != 1 || r.Validation[0].AddedRTTus != 2 {
		t.Errorf("validation %+v, want one check at 2 us", r.Validation)
	}
	o.JSON = false
	out, err = run(t, o)
	rows := regexp.MustCompile(`(?m)^\s+\d+\s+[0-9.]+ %\s+[0-9.]+ %\s+[-+][0-9.]+ pp$`).FindAllString(out, -1)
	if err != nil || len(rows) != 1 || !strings.Contains(rows[0], " 2 ") {
		t.Errorf("text validation rows %q (%v):\n%s", rows, err, out)
	}
}

// TestMarkdownValidate: --markdown --validate prints the README's second
// table, predicted / measured per RTT, one row per trace.
func TestMarkdownValidate(t *testing.T) {
	t.Parallel()
	p := writeTrace(t, tinyTrace)
	o := opts(p, p)
	o.Markdown, o.Validate, o.Sweep = true, true, "2us,20us"
	out, err := run(t, o)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := regexp.MustCompile(`^\| tiny \| [0-9.]+ / [0-9.]+ \| [0-9.]+ / [0-9.]+ \|$`)
	if len(lines) != 4 || lines[0] != "| trace | +2 us | +20 us |" || lines[1] != "| --- | ---: | ---: |" ||
		!want.MatchString(lines[2]) || !want.MatchString(lines[3]) {
		t.Fatalf("markdown --validate:\n%s", out)
	}
}

// TestNoFlagIgnored: options that would not change what is printed are
// refused, and a plot that cannot be written fails before any output.
func TestNoFlagIgnored(t *testing.T) {
	t.Parallel()
	p := writeTrace(t, tinyTrace)
	for name, c := range map[string]struct {
		mod  func(*Options)
		want string
	}{
		"--markdown --json":  {func(o *Options) { o.Markdown, o.JSON = true, true }, "--markdown or --json, not both"},
		"--markdown --rtt":   {func(o *Options) { o.Markdown, o.NetworkRTT, o.NetworkRTTSet = true, time.Microsecond, true }, "--rtt does not apply"},
		"--markdown --added": {func(o *Options) { o.Markdown, o.RTTSet = true, true }, "--added-rtt does not apply"},
		"--markdown --validate --target": {func(o *Options) { o.Markdown, o.Validate, o.TargetSet = true, true, true },
			"--target does not apply"},
		"--validate, no emulator": {func(o *Options) { o.Validate, o.Measurer = true, nil }, "needs the emulator"},
		"--plot in no directory": {func(o *Options) { o.Sweep, o.Plot = "default", filepath.Join(t.TempDir(), "no", "x.svg") },
			"no such file or directory"},
		"--plot under a file": {func(o *Options) { o.Plot = filepath.Join(p, "x.svg") }, "is not a directory"},
	} {
		o := opts(p)
		c.mod(&o)
		out, err := run(t, o)
		if !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), c.want) || out != "" {
			t.Errorf("%s: %v, stdout %q; want a usage error %q and no output", name, err, out, c.want)
		}
	}
	// The plot's directory is checked before any trace is read.
	o := opts(filepath.Join(t.TempDir(), "missing.json"))
	o.Plot = "/nonexistent/x.svg"
	if _, err := run(t, o); err == nil || !strings.HasPrefix(err.Error(), "--plot /nonexistent/x.svg: ") {
		t.Errorf("--plot in no directory, missing trace: %v, want the --plot error first", err)
	}
	// A plot that fails only when written (a directory in its place)
	// leaves no report behind.
	o = opts(p)
	o.Plot = filepath.Join(t.TempDir(), "d.svg")
	if err := os.Mkdir(o.Plot, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, o); !errors.Is(err, apperr.ErrUsage) || out != "" {
		t.Errorf("--plot onto a directory: %v, stdout %q", err, out)
	}
	o = opts(p)
	o.Validate, o.Measurer = true, nil
	if _, err := run(t, o); !errors.Is(err, model.ErrNoMeasurer) {
		t.Errorf("--validate without a measurer: %v does not wrap model.ErrNoMeasurer", err)
	}
}

// TestFlagValues: the link rate is refused when not a finite number of
// Gbit/s from 0 to model.MaxLinkGbps, under the spelling given; round
// trips outside 0..model.MaxRTT are refused, written with us.
func TestFlagValues(t *testing.T) {
	t.Parallel()
	p := writeTrace(t, tinyTrace)
	for name, c := range map[string]struct {
		mod  func(*Options)
		want string
	}{
		"NaN":         {func(o *Options) { o.LinkGbps = math.NaN() }, "--link-gbps NaN: want a number of Gbit/s"},
		"+Inf --gbit": {func(o *Options) { o.LinkGbps, o.LinkFlag = math.Inf(1), "--gbit" }, "--gbit +Inf: want a number of Gbit/s"},
		"negative":    {func(o *Options) { o.LinkGbps = -1 }, "--link-gbps -1: want a number of Gbit/s from 0 (no limit) up to 10000"},
		"huge --bw":   {func(o *Options) { o.LinkGbps, o.LinkFlag = 1e6, "--bw" }, "--bw 1e+06: want a number of Gbit/s from 0 (no limit) up to 10000"},
		"--rtt 1000h": {func(o *Options) { o.NetworkRTT, o.NetworkRTTSet = 1000*time.Hour, true }, "--rtt 1000h0m0s: want at most 1s"},
		"--rtt -5us":  {func(o *Options) { o.NetworkRTT, o.NetworkRTTSet = -5*time.Microsecond, true }, "--rtt -5us: must not be negative"},
		"--added-rtt": {func(o *Options) { o.AddedRTT = 1500 * time.Millisecond }, "--added-rtt 1.5s: want at most 1s"},
		"--sweep 2s":  {func(o *Options) { o.Sweep = "2us,2s" }, "--sweep: model: RTT 2s: want 0 up to 1s"},
		"--tags":      {func(o *Options) { o.Tags, o.TagsSet = 2000, true }, "--tags 2000: want 1..768"},
		"--tags 769":  {func(o *Options) { o.Tags, o.TagsSet = 769, true }, "--tags 769: want 1..768"},
		"--mrrs":      {func(o *Options) { o.MRRS, o.MRRSSet = 100, true }, "--mrrs 100: want a power of two"},
	} {
		o := opts(p)
		c.mod(&o)
		out, err := run(t, o)
		if !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), c.want) || out != "" {
			t.Errorf("%s: %v, stdout %q; want a usage error %q", name, err, out, c.want)
		}
	}
	o := opts(p)
	o.NetworkRTT, o.NetworkRTTSet = time.Second, true
	if _, err := run(t, o); err != nil {
		t.Errorf("--rtt 1s: %v", err)
	}
}

// unitless are the JSON keys of `dxpu model` that need no unit: names,
// counts and flags.
var unitless = map[string]bool{"trace": true, "tags": true, "budget_at_least": true, "budget_none_reason": true,
	"steps": true, "sweep": true, "validation": true, "graph": true, "breakdown": true, "step": true,
	"events": true, "nodes": true, "edges": true, "launches": true, "orphans": true, "waits": true,
	"wait_guesses": true, "event_edges": true}

var unitSuffix = regexp.MustCompile(`_(us|ns|s|pct|gbps|bytes|points)$`)

// TestJSONKeysCarryUnits: every key of the model's JSON is snake_case
// with its unit, or a name or count; mrrs_bytes, not mrrs; rtt_us when a
// network RTT was given.
func TestJSONKeysCarryUnits(t *testing.T) {
	t.Parallel()
	o := opts(writeTrace(t, tinyTrace))
	o.JSON, o.Sweep, o.Validate, o.NetworkRTT, o.NetworkRTTSet = true, "2us", true, 5*time.Microsecond, true
	out, err := run(t, o)
	var r map[string]any
	if err != nil || json.Unmarshal([]byte(out), &r) != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if r["rtt_us"] != 5.0 || r["added_rtt_us"] != 6.3 || r["mrrs_bytes"] != 512.0 || r["mrrs"] != nil {
		t.Errorf("rtt_us %v, added_rtt_us %v, mrrs_bytes %v, mrrs %v", r["rtt_us"], r["added_rtt_us"], r["mrrs_bytes"], r["mrrs"])
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if !unitless[k] && !unitSuffix.MatchString(k) {
					t.Errorf("JSON key %q carries no unit", k)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(r)
	// Without --rtt, no rtt_us: the added RTT alone was given.
	o = opts(o.Traces...)
	o.JSON = true
	if out, err := run(t, o); err != nil || strings.Contains(out, `"rtt_us"`) {
		t.Errorf("rtt_us without --rtt (%v): %s", err, out)
	}
}
