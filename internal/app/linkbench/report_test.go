package linkbench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
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
		"--loss NaN": func(o *ReportOptions) { o.Loss = math.NaN() }, "--dup NaN": func(o *ReportOptions) { o.Dup = math.NaN() },
		"--reorder NaN": func(o *ReportOptions) { o.Reorder = math.NaN() }, "--corrupt NaN": func(o *ReportOptions) { o.Corrupt = math.NaN() },
		"--link-gbps NaN": func(o *ReportOptions) { o.LinkGbps = math.NaN() },
		"--delay 100h":    func(o *ReportOptions) { o.Delay = 100 * time.Hour },
		"--mix nope=1":    func(o *ReportOptions) { o.Mix = "nope=1" }, "--mix write=0": func(o *ReportOptions) { o.Mix = "write=0" },
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

// TestWhyReadsFailed: failed reads on a run without faults are explained:
// how many timed out, how many of those were answered late, and the stall
// of the process that outlasted the timeout; a run without failures says
// nothing more.
func TestWhyReadsFailed(t *testing.T) {
	t.Parallel()
	r := Report{InvariantsHold: true, Result: Result{Completed: 91182, Failed: 73, ReadsTimedOut: 73, LateCompletions: 73,
		CompletionTimeoutMs: 50, MaxStallMs: 62.7}}
	var out bytes.Buffer
	if err := writeOut(&out, &ReportOptions{}, Options{}, r); err != nil {
		t.Fatal(err)
	}
	want := "reads failed 73: 73 timed out at the 50 ms completion timeout (the bridge answered CA), 73 of whose completions arrived after it; " +
		"this process stalled up to 62.7 ms (a busy machine), past the timeout: the machine, not the link\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("text lacks %q:\n%s", want, out.String())
	}
	out.Reset()
	r.Failed, r.ReadsTimedOut, r.LateCompletions = 0, 0, 0
	if err := writeOut(&out, &ReportOptions{}, Options{}, r); err != nil || strings.Contains(out.String(), "reads failed") {
		t.Errorf("%v:\n%s", err, out.String())
	}
	// The JSON has the keys that explain failed reads.
	out.Reset()
	if err := writeOut(&out, &ReportOptions{JSON: true}, Options{}, r); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"reads_timed_out": 0`, `"late_completions": 0`, `"completion_timeout_ms": 50`, `"max_stall_ms": 62.7`} {
		if !strings.Contains(out.String(), k) {
			t.Errorf("JSON lacks %s", k)
		}
	}
}

// TestStallWatch: the longest gap between ticks beyond the period.
func TestStallWatch(t *testing.T) {
	t.Parallel()
	var w stallWatch
	t0 := time.Unix(0, 0)
	w.last = t0
	for _, at := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 65 * time.Millisecond, 66 * time.Millisecond} {
		w.tick(t0.Add(at), time.Millisecond)
	}
	if got := time.Duration(w.max.Load()); got != 62*time.Millisecond {
		t.Errorf("max stall %v, want 62ms", got)
	}
}

// TestBurstClock: one reading serves a runner's burst, and the next
// burst reads the clock again.
func TestBurstClock(t *testing.T) {
	t.Parallel()
	c := burstClock{t0: time.Now()}
	first := c.now()
	c.t0 = c.t0.Add(-time.Hour) // an hour passes, as far as the clock can tell
	if again := c.now(); again != first {
		t.Errorf("within a burst: %v then %v, want one reading", first, again)
	}
	c.next()
	if later := c.now(); later < first+time.Hour {
		t.Errorf("the next burst read %v, want at least %v", later, first+time.Hour)
	}
}

// TestReportRaw: a real-time run reports the raw UDP and TCP baselines of
// the same loopback and the pair's ratios to them (positive, consistent
// with the goodputs; no speed is asserted), and the text names them; a
// virtual run and --raw=false leave them out.
func TestReportRaw(t *testing.T) {
	o := reportOptions()
	o.Virtual, o.Raw, o.JSON = false, true, true
	o.Duration, o.RawFor = 150*time.Millisecond, 100*time.Millisecond
	var out bytes.Buffer
	if err := WriteReport(context.Background(), o, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.UDP == nil || rep.UDPGoodputGbps <= 0 || rep.TCPGoodputGbps <= 0 || rep.UDP.DatagramBytes != o.MTU ||
		rep.UDP.Received == 0 || rep.UDP.Received > rep.UDP.Sent {
		t.Fatalf("raw baselines: %+v", rep)
	}
	if b := rep.UDPBefore; b == nil || b.GoodputGbps <= 0 || b.DatagramBytes != o.MTU ||
		rep.UDPGoodputGbps != (b.GoodputGbps+rep.UDP.GoodputGbps)/2 ||
		rep.UDPDrift != max(b.GoodputGbps, rep.UDP.GoodputGbps)/min(b.GoodputGbps, rep.UDP.GoodputGbps) {
		t.Errorf("UDP before %+v, after %+v: mean %v, drift %v", b, rep.UDP, rep.UDPGoodputGbps, rep.UDPDrift)
	}
	if got, want := rep.PairOverUDP, rep.GoodputGbps/rep.UDPGoodputGbps; got <= 0 || got != want {
		t.Errorf("pair_over_udp %v, want %v", got, want)
	}
	if got, want := rep.PairOverTCP, rep.GoodputGbps/rep.TCPGoodputGbps; got <= 0 || got != want {
		t.Errorf("pair_over_tcp %v, want %v", got, want)
	}
	if rep.PairFrameBytes <= 0 || rep.PairFrameBytes > o.MTU || rep.UDPSameFrames == nil || rep.UDPSameFrames.DatagramBytes != rep.PairFrameBytes ||
		rep.UDPSameFramesGbps <= 0 || rep.PairOverUDPSameFrames != rep.GoodputGbps/rep.UDPSameFramesGbps {
		t.Errorf("raw UDP at the pair's frame size: %d bytes, %+v, %v Gbit/s, ratio %v", rep.PairFrameBytes, rep.UDPSameFrames,
			rep.UDPSameFramesGbps, rep.PairOverUDPSameFrames)
	}
	if rep.CPUSecondsPerGB <= 0 || rep.UDPCPUSecondsPerGB != (rep.UDP.CPUSecondsPerGB+rep.UDPBefore.CPUSecondsPerGB)/2 ||
		rep.PairCPUOverUDP != rep.CPUSecondsPerGB/rep.UDPCPUSecondsPerGB {
		t.Errorf("CPU per GB: pair %v, raw UDP %v, ratio %v", rep.CPUSecondsPerGB, rep.UDPCPUSecondsPerGB, rep.PairCPUOverUDP)
	}
	if rep.PairFrameSide != "host" {
		t.Errorf("the default mix's frames measured on the %q side, want host (it sends more)", rep.PairFrameSide)
	}
	for _, key := range []string{`"udp_goodput_gbps"`, `"tcp_goodput_gbps"`, `"pair_over_udp"`, `"pair_over_tcp"`, `"datagram_bytes"`,
		`"pair_frame_bytes"`, `"udp_same_frames_goodput_gbps"`, `"pair_over_udp_same_frames"`, `"cpu_s_per_gb"`, `"pair_cpu_over_udp"`,
		`"udp_before"`, `"udp_drift_ratio"`, `"udp_cpu_s_per_gb"`, `"pair_frame_side"`} {
		if !strings.Contains(out.String(), key) {
			t.Errorf("JSON lacks %s", key)
		}
	}
	o.JSON = false
	out.Reset()
	if err := WriteReport(context.Background(), o, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "raw UDP (two plain sockets, 9000-byte datagrams") || !strings.Contains(out.String(), "raw TCP") ||
		!strings.Contains(out.String(), "raw UDP again with the pair's mean frame") || !strings.Contains(out.String(), "CPU per GB: raw UDP") {
		t.Errorf("text lacks the raw baselines:\n%s", out.String())
	}
	// Reads only: the GPU side sends the bytes (the host side, requests),
	// and the same-size flood takes the GPU side's frames.
	ro := o
	ro.JSON, ro.Mix, ro.ReadSize = true, "read=1", 4096
	out.Reset()
	if err := WriteReport(context.Background(), ro, &out); err != nil {
		t.Fatal(err)
	}
	rep = Report{}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	var ctr struct { // the counters' JSON is snake_case (BridgeCounters)
		GPU struct {
			Bytes  uint64 `json:"bytes_sent"`
			Frames uint64 `json:"frames_sent"`
		} `json:"gpu_counters"`
	}
	if err := json.Unmarshal(out.Bytes(), &ctr); err != nil {
		t.Fatal(err)
	}
	if g := ctr.GPU; rep.PairFrameSide != "gpu" || g.Frames == 0 || rep.PairFrameBytes != int(g.Bytes/g.Frames) {
		t.Errorf("reads only: frames of the %q side, %d bytes; the GPU side sent %d bytes in %d frames", rep.PairFrameSide,
			rep.PairFrameBytes, g.Bytes, g.Frames)
	}
	for name, mod := range map[string]func(*ReportOptions){
		"virtual":     func(o *ReportOptions) { o.Virtual, o.Duration = true, 200*time.Microsecond },
		"--raw=false": func(o *ReportOptions) { o.Raw = false },
	} {
		o := o
		o.JSON = true
		mod(&o)
		out.Reset()
		if err := WriteReport(context.Background(), o, &out); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out.String(), "udp_goodput_gbps") || strings.Contains(out.String(), "pair_over_udp") {
			t.Errorf("%s: raw baselines reported:\n%s", name, out.String())
		}
	}
}

// TestEventLogBounded: a link that goes down under load reports every
// write offered while it is down; the result lists the first events and
// counts the rest, by side and kind.
func TestEventLogBounded(t *testing.T) {
	t.Parallel()
	var l eventLog
	l.add("gpu", bridge.Event{Kind: bridge.EventLinkDown, Reason: "peer silent"})
	for range 20000 {
		l.add("host", bridge.Event{Kind: bridge.EventPostedLost, Count: 1})
	}
	l.add("gpu", bridge.Event{Kind: bridge.EventLinkUp})
	l.addLine("host last frame error: x")
	got := l.list()
	if len(got) != maxEventLines+3 {
		t.Fatalf("%d lines, want %d: %q", len(got), maxEventLines+3, got)
	}
	if !strings.HasPrefix(got[0], "gpu: link-down") || got[maxEventLines] != "host last frame error: x" {
		t.Errorf("kept lines: %q ... %q", got[0], got[maxEventLines])
	}
	if want := []string{"host: 19969 more posted-lost events (19969 posted TLPs)", "gpu: 1 more link-up events"}; !slices.Equal(got[maxEventLines+1:], want) {
		t.Errorf("counted lines %q, want %q", got[maxEventLines+1:], want)
	}
}
