package fabricbench

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/model"
)

// reportOptions are `dxpu bench fabric`'s defaults.
func reportOptions() ReportOptions {
	return ReportOptions{RTT: 5 * time.Microsecond, Gbit: 100, Tags: 768, MRRS: 512, Sizes: "4K,64K,1M,16M,64M", Model: "h100",
		SimBytes: 4 << 20, Clock: "virtual"}
}

func TestReportJSON(t *testing.T) {
	t.Parallel()
	o := reportOptions()
	o.JSON, o.RTT, o.Tags, o.Sizes = true, 10*time.Microsecond, 256, "64K,4M"
	var out bytes.Buffer
	if err := WriteReport(o, &out); err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	// One result object, indented by two spaces as every command's (it
	// was one line).
	if !bytes.HasPrefix(out.Bytes(), []byte("{\n  \"rtt_us\": 10,\n")) || !bytes.HasSuffix(out.Bytes(), []byte("\n}\n")) {
		t.Errorf("want one object indented by two spaces:\n%s", out.String())
	}
	if rep.MMIOReadUs.Fabric-rep.MMIOReadUs.Native < 10 || len(rep.H2D) != 2 || rep.H2D[1].FabricGbps >= rep.H2D[1].NativeGbps {
		t.Fatalf("unexpected report %+v", rep)
	}
	// 256 tags x 512 B over a ~12us read round trip bounds H2D near 11 GB/s (88 Gbit/s).
	if g := rep.H2D[1].FabricGbps / 8; g > 11.5 || g < 8 {
		t.Fatalf("H2D 4 MiB over the fabric at 10us with 256 tags: %.2f GB/s", g)
	}
}

func TestReportBadOptions(t *testing.T) {
	t.Parallel()
	for name, mod := range map[string]func(*ReportOptions){
		"--sizes 0": func(o *ReportOptions) { o.Sizes = "0" }, "--gpu v100": func(o *ReportOptions) { o.Model = "v100" },
		"--tags 0": func(o *ReportOptions) { o.Tags = 0 }, "--mrrs 100": func(o *ReportOptions) { o.MRRS = 100 },
		"--tags above model.MaxTags": func(o *ReportOptions) { o.Tags = model.MaxTags + 1 },
		"--loss without --bridge":    func(o *ReportOptions) { o.Loss = 0.1 }, "--clock now": func(o *ReportOptions) { o.Clock = "now" },
		"--bridge --loss NaN": func(o *ReportOptions) { o.Bridge, o.Loss = true, math.NaN() },
		// Runs that would not end: hours of virtual time, or minutes of
		// retransmissions.
		"--link-gbps 1e-9":    func(o *ReportOptions) { o.Gbit = 1e-9 },
		"--bridge --loss 0.9": func(o *ReportOptions) { o.Bridge, o.Loss = true, 0.9 },
		// 2^54 G wraps to 0 bytes when multiplied out.
		"--sizes 18014398509481984G": func(o *ReportOptions) { o.Sizes = "18014398509481984G" },
		"--sizes 5G":                 func(o *ReportOptions) { o.Sizes = "5G" },
		// Copies move whole DWs, as bench e2e's: 3 bytes ran.
		"--sizes 3": func(o *ReportOptions) { o.Sizes = "3" }, "--sizes 4K,6": func(o *ReportOptions) { o.Sizes = "4K,6" },
		"--sizes 4K,,1M": func(o *ReportOptions) { o.Sizes = "4K,,1M" }, `--sizes ""`: func(o *ReportOptions) { o.Sizes = "" },
	} {
		o := reportOptions()
		mod(&o)
		if err := WriteReport(o, io.Discard); !errors.Is(err, apperr.ErrUsage) {
			t.Errorf("%s: %v, want a usage error", name, err)
		} else if flag := lastFlag(name); !strings.Contains(err.Error(), flag) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %q: want one line naming %s", name, err, flag)
		}
	}
}

// lastFlag is the last --flag of a case's name.
func lastFlag(name string) string {
	flag := ""
	for _, f := range strings.Fields(name) {
		if strings.HasPrefix(f, "--") {
			flag = f
		}
	}
	return flag
}

// TestReportAcceptedExtremes: every RTT, link rate and loss the checks
// accept runs, the long round trips and slow links included (enumeration
// timed out at 50ms and found no GPU), and the fabric's MMIO read shows
// the round trip.
func TestReportAcceptedExtremes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		rtt    time.Duration
		gbit   float64
		bridge bool
		loss   float64
	}{
		{100 * time.Millisecond, 100, false, 0}, {time.Second, 100, false, 0},
		{100 * time.Millisecond, 100, true, 0}, {time.Second, 100, true, 0},
		{5 * time.Microsecond, MinLinkGbps, false, 0}, {5 * time.Microsecond, MinLinkGbps, true, 0},
		{5 * time.Microsecond, 100, true, MaxBridgeLoss}, {time.Second, 100, true, MaxBridgeLoss},
	} {
		o := reportOptions()
		o.JSON, o.RTT, o.Gbit, o.Bridge, o.Loss, o.Sizes = true, c.rtt, c.gbit, c.bridge, c.loss, "4K,64K"
		var out bytes.Buffer
		if err := WriteReport(o, &out); err != nil {
			t.Errorf("%+v: %v", c, err)
			continue
		}
		var rep Report
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("%+v: %v\n%s", c, err, out.String())
		}
		if rep.MMIOReadUs.Fabric < float64(c.rtt)/1e3 || len(rep.H2D) != 2 || !(rep.H2D[1].FabricGbps > 0) {
			t.Errorf("%+v: %+v", c, rep)
		}
	}
}

// TestReportTextRate: the header gives the link rate as given, not
// rounded to whole Gbit/s (0.1 printed as 0).
func TestReportTextRate(t *testing.T) {
	t.Parallel()
	o := reportOptions()
	o.Gbit, o.Sizes = 0.1, "4K"
	var out bytes.Buffer
	if err := WriteReport(o, &out); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out.Bytes(), []byte(", 0.1 Gbit/s, ")) {
		t.Errorf("header lacks the rate 0.1 Gbit/s:\n%s", out.String())
	}
}
