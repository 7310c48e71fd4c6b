package linkbench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/app/apperr"
)

// reportOptions are `dxpu bench link --virtual`'s defaults, shortened.
func reportOptions() ReportOptions {
	return ReportOptions{Mix: "write=0.7,read=0.3", WriteSize: 256, ReadSize: 512, Duration: 200 * time.Microsecond,
		Outstanding: 64, MTU: 9000, Window: 1024, Seed: 1, Baseline: true, Virtual: true, Interval: 50 * time.Nanosecond}
}

// TestReportVirtual: with loss, a lossless baseline runs first, the
// invariants hold, and the JSON says so; the text names the baseline.
func TestReportVirtual(t *testing.T) {
	t.Parallel()
	o := reportOptions()
	o.Loss, o.JSON = 0.01, true
	var out bytes.Buffer
	if err := WriteReport(context.Background(), o, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !rep.InvariantsHold || rep.Baseline == nil || rep.GoodputRatio <= 0 || !rep.Virtual || rep.Faults.Loss != 0.01 || rep.Delivered == 0 {
		t.Fatalf("report %+v", rep)
	}
	o.JSON = false
	out.Reset()
	if err := WriteReport(context.Background(), o, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"baseline (same delay and bandwidth, no faults)", "% of baseline)", "unanswered 0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, out.String())
		}
	}
}

func TestReportBadOptions(t *testing.T) {
	t.Parallel()
	for name, mod := range map[string]func(*ReportOptions){
		"--loss 2": func(o *ReportOptions) { o.Loss = 2 }, "--bw fast": func(o *ReportOptions) { o.BW = "fast" },
		"--mix nope=1": func(o *ReportOptions) { o.Mix = "nope=1" }, "--mix write=0": func(o *ReportOptions) { o.Mix = "write=0" },
		"--seal-mode without --keys": func(o *ReportOptions) { o.SealMode = "gcm" },
		"--seal-mode ccm":            func(o *ReportOptions) { o.Keys, o.SealMode = true, "ccm" },
	} {
		o := reportOptions()
		mod(&o)
		if err := WriteReport(context.Background(), o, io.Discard); !errors.Is(err, apperr.ErrUsage) {
			t.Errorf("%s: %v, want a usage error", name, err)
		}
	}
}

// TestReportKeys: --keys runs the pair unkeyed, then keyed (frames sealed
// and opened, none refused), both with the invariants holding, and reports
// the plaintext goodput and the ratio.
func TestReportKeys(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"gcm", "gmac"} {
		o := reportOptions()
		o.Loss, o.Keys, o.SealMode, o.JSON = 0.01, true, mode, true
		var out bytes.Buffer
		if err := WriteReport(context.Background(), o, &out); err != nil {
			t.Fatalf("%s: %v\n%s", mode, err, out.String())
		}
		var rep Report
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		if !rep.Keyed || rep.SealMode != mode || rep.Plaintext == nil || rep.PlaintextGoodputGbps <= 0 || rep.KeyedRatio <= 0 ||
			!rep.InvariantsHold || rep.Delivered == 0 {
			t.Fatalf("%s: report %+v", mode, rep)
		}
		var raw map[string]any
		if err := json.Unmarshal(out.Bytes(), &raw); err != nil {
			t.Fatal(err)
		}
		sealed := func(run map[string]any) float64 {
			return run["host_counters"].(map[string]any)["frames_sealed"].(float64)
		}
		if k, p := sealed(raw), sealed(raw["plaintext"].(map[string]any)); k == 0 || p != 0 {
			t.Fatalf("%s: frames sealed keyed %v, plaintext %v", mode, k, p)
		}
		for _, key := range []string{`"plaintext_goodput_gbps"`, `"keyed_ratio"`} {
			if !strings.Contains(out.String(), key) {
				t.Errorf("JSON lacks %s", key)
			}
		}
	}
}
