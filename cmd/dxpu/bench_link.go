package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/bridge/memlink"
	"github.com/dxpu/dxpu/internal/app/linkbench"
)

var benchLinkFlags struct {
	loss, dup, reorder, corrupt float64
	delay                       time.Duration
	bw                          string
	mix                         string
	writeSize, readSize         int
	duration                    time.Duration
	outstanding, mtu, window    int
	seed                        uint64
	baseline, jsonOut           bool
	virtual                     bool
	interval                    time.Duration
}

var benchLinkCmd = &cobra.Command{
	Use:   "link",
	Short: "Measure a bridge pair over UDP on loopback, with injected faults",
	Long: `link runs a host-side and a GPU-side bridge in this process, joined by two
UDP sockets on 127.0.0.1, on real time. Loss, duplication, reordering,
corruption, delay and a bandwidth limit are injected in code (the kernel
has no netem). A stub requester on the host side issues the TLP mix as fast
as the bridges take it; a stub completer on the GPU side answers reads with
completions split at MPS and a 64-byte RCB.

It prints goodput, latency percentiles (posted writes one way, reads round
trip), retransmissions, and the invariants it checked: delivered, lost,
duplicated, misordered (posted writes) and unanswered (non-posted requests
without a final completion). With faults, a lossless baseline runs first
with the same mix so the goodput ratio compares figures from one run.

  dxpu bench link --loss 0.01 --delay 5us --json
  dxpu bench link --virtual --loss 0.01 --delay 5us --bw 100G --duration 2ms
  dxpu bench link --mix write=0.5,read=0.5 --read-size 4096 --duration 5s`,
	Args: cobra.NoArgs,
	RunE: runBenchLink,
}

func init() {
	f := benchLinkCmd.Flags()
	fl := &benchLinkFlags
	f.Float64Var(&fl.loss, "loss", 0, "probability a frame is lost (each direction)")
	f.Float64Var(&fl.dup, "dup", 0, "probability a frame is duplicated")
	f.Float64Var(&fl.reorder, "reorder", 0, "probability a frame is held back behind the next one")
	f.Float64Var(&fl.corrupt, "corrupt", 0, "probability a frame gets a bit flipped (dropped by the FCS check)")
	f.DurationVar(&fl.delay, "delay", 0, "one-way delay added to every frame (e.g. 5us)")
	f.StringVar(&fl.bw, "bw", "", "bandwidth limit per direction in bit/s, with K, M or G suffix (e.g. 10G)")
	f.StringVar(&fl.mix, "mix", "write=0.7,read=0.3", "TLP mix: weights of write (posted MWr), read (MRd) and cfg (CfgRd0)")
	f.IntVar(&fl.writeSize, "write-size", 256, "payload bytes per posted write")
	f.IntVar(&fl.readSize, "read-size", 512, "bytes per read request")
	f.DurationVar(&fl.duration, "duration", 2*time.Second, "how long to issue traffic")
	f.IntVar(&fl.outstanding, "outstanding", 64, "reads in flight at most")
	f.IntVar(&fl.mtu, "mtu", 9000, "frame size limit from the dxpu header on (1472 for a 1500-byte Ethernet MTU)")
	f.IntVar(&fl.window, "window", 1024, "TLPs in flight per direction")
	f.Uint64Var(&fl.seed, "seed", 1, "seed of the traffic and fault draws")
	f.BoolVar(&fl.baseline, "baseline", true, "with faults, first run a lossless baseline and report the goodput ratio")
	f.BoolVar(&fl.jsonOut, "json", false, "print one JSON object")
	f.BoolVar(&fl.virtual, "virtual", false, "run in virtual time on the simulator over in-memory links (deterministic; --duration is virtual, keep it to milliseconds)")
	f.DurationVar(&fl.interval, "interval", 50*time.Nanosecond, "with --virtual: one TLP issued every interval (open loop)")
	benchCmd.AddCommand(benchLinkCmd)
}

func parseBandwidth(s string) (float64, error) {
	if s == "" {
		return 0, nil
	}
	mult := 1.0
	switch strings.ToUpper(s[len(s)-1:]) {
	case "K":
		mult = 1e3
	case "M":
		mult = 1e6
	case "G":
		mult = 1e9
	}
	if mult != 1 {
		s = s[:len(s)-1]
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("--bw %q: want a positive number of bit/s with an optional K, M or G suffix", s)
	}
	return v * mult, nil
}

func parseMix(s string, o *linkbench.Options) error {
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		w, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil || w < 0 {
			return fmt.Errorf("--mix: %q: want name=weight with a non-negative weight", part)
		}
		switch k {
		case "write":
			o.Write = w
		case "read":
			o.Read = w
		case "cfg", "config":
			o.Config = w
		default:
			return fmt.Errorf("--mix: unknown TLP kind %q (want write, read or cfg)", k)
		}
	}
	if o.Write+o.Read+o.Config == 0 {
		return fmt.Errorf("--mix %q: all weights are 0", s)
	}
	return nil
}

type benchLinkOutput struct {
	linkbench.Result
	Faults          memlink.Faults    `json:"faults"`
	Virtual         bool              `json:"virtual"`
	Baseline        *linkbench.Result `json:"baseline,omitempty"`
	BaselineGoodput float64           `json:"baseline_goodput_gbps,omitempty"`
	GoodputRatio    float64           `json:"goodput_ratio,omitempty"`
	InvariantsHold  bool              `json:"invariants_hold"`
}

func runBenchLink(cmd *cobra.Command, _ []string) error {
	fl := &benchLinkFlags
	for name, p := range map[string]float64{"loss": fl.loss, "dup": fl.dup, "reorder": fl.reorder, "corrupt": fl.corrupt} {
		if p < 0 || p > 1 {
			return exitCodeError{2, fmt.Errorf("--%s %v: want a probability in 0..1", name, p)}
		}
	}
	bw, err := parseBandwidth(fl.bw)
	if err != nil {
		return exitCodeError{2, err}
	}
	o := linkbench.Options{
		Faults:      memlink.Faults{Loss: fl.loss, Duplicate: fl.dup, Reorder: fl.reorder, Corrupt: fl.corrupt, Delay: fl.delay, Bandwidth: bw},
		WriteBytes:  fl.writeSize,
		ReadBytes:   fl.readSize,
		Duration:    fl.duration,
		Outstanding: fl.outstanding,
		MTU:         fl.mtu,
		Window:      fl.window,
		Seed:        fl.seed,
	}
	if err := parseMix(fl.mix, &o); err != nil {
		return exitCodeError{2, err}
	}
	run := func(o linkbench.Options) (linkbench.Result, error) {
		if fl.virtual {
			return linkbench.RunVirtual(o, fl.interval)
		}
		return linkbench.Run(cmd.Context(), o)
	}
	out := benchLinkOutput{Faults: o.Faults, Virtual: fl.virtual}
	if fl.baseline && (o.Faults.Loss+o.Faults.Duplicate+o.Faults.Reorder+o.Faults.Corrupt > 0) {
		bo := o
		// The baseline keeps the delay and bandwidth: only the faults go.
		bo.Faults = memlink.Faults{Delay: o.Faults.Delay, Bandwidth: o.Faults.Bandwidth}
		b, err := run(bo)
		if err != nil {
			return exitCodeError{2, err}
		}
		out.Baseline = &b
		out.BaselineGoodput = b.GoodputGbps
	}
	r, err := run(o)
	if err != nil {
		return exitCodeError{2, err}
	}
	out.Result = r
	out.InvariantsHold = r.OK() && (out.Baseline == nil || out.Baseline.OK())
	if out.Baseline != nil && out.Baseline.GoodputGbps > 0 {
		out.GoodputRatio = r.GoodputGbps / out.Baseline.GoodputGbps
	}
	if fl.jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return exitCodeError{2, err}
		}
	} else {
		w := cmd.OutOrStdout()
		f := o.Faults
		fmt.Fprintf(w, "faults: loss %g dup %g reorder %g corrupt %g delay %v bw %s\n", f.Loss, f.Duplicate, f.Reorder, f.Corrupt, f.Delay, fl.bw)
		if b := out.Baseline; b != nil {
			fmt.Fprintf(w, "baseline (same delay and bandwidth, no faults): goodput %.3f Gb/s\n", b.GoodputGbps)
		}
		fmt.Fprintf(w, "goodput %.3f Gb/s over %.6f s", r.GoodputGbps, r.Seconds)
		if out.GoodputRatio > 0 {
			fmt.Fprintf(w, " (%.0f%% of baseline)", 100*out.GoodputRatio)
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "write latency (one way) us: p50 %.1f p90 %.1f p99 %.1f p99.9 %.1f max %.1f (%d)\n",
			r.WriteLatency.P50, r.WriteLatency.P90, r.WriteLatency.P99, r.WriteLatency.P999, r.WriteLatency.Max, r.WriteLatency.Count)
		fmt.Fprintf(w, "read latency (round trip) us: p50 %.1f p90 %.1f p99 %.1f p99.9 %.1f max %.1f (%d)\n",
			r.ReadLatency.P50, r.ReadLatency.P90, r.ReadLatency.P99, r.ReadLatency.P999, r.ReadLatency.Max, r.ReadLatency.Count)
		fmt.Fprintf(w, "retransmits %d, RTOs %d, frames lost on the link %d\n", r.Retransmits, r.RTOs, r.Link[0].Lost+r.Link[1].Lost)
		fmt.Fprintf(w, "delivered %d lost %d (reported %d, link downs %d) duplicated %d misordered %d unanswered %d (reads %d ok, %d failed)\n",
			r.Delivered, r.Lost, r.ReportedLost, r.LinkDowns, r.Duplicated, r.Misordered, r.Unanswered, r.Completed, r.Failed)
	}
	if !out.InvariantsHold {
		return exitCodeError{1, fmt.Errorf("bench link: invariants broken: lost %d (reported %d) duplicated %d misordered %d unanswered %d",
			r.Lost, r.ReportedLost, r.Duplicated, r.Misordered, r.Unanswered)}
	}
	return nil
}
