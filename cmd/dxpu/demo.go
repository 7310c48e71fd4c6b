package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/dxpu/dxpu/emu/replay"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/dxpu/dxpu/internal/app/demo"
)

var demoFlags struct {
	json   bool
	rtt    time.Duration
	gbit   float64
	traces string
	quiet  bool
	bridge bool
}

var demoCmd = &cobra.Command{
	Use:   "demo",
	Short: "Emulated datacenter: hosts borrow remote GPUs through the control plane; workloads native vs over the fabric",
	Long: `demo builds, in this process and without root, 4 hosts and 2 GPU boxes of 8 GPUs,
registers them with an in-memory control plane, lets the hosts ask for 1, 2, 4 and 8 GPUs,
hot-adds each host's GPUs behind the virtual switch of its host-side bridge and enumerates
them through real dxpu bridge pairs, fails one GPU and releases one allocation to show
surprise and orderly removal, then runs bundled workloads and the profiler traces in
../shared/traces natively and over the fabric, in virtual time. It prints, per workload,
the native time, the fabric time, the overhead and the performance model's prediction.`,
	Args: cobra.NoArgs,
	RunE: runDemo,
}

func init() {
	f := demoCmd.Flags()
	f.BoolVar(&demoFlags.json, "json", false, "print a JSON array, one object per workload (native_s, fabric_s, overhead_pct, ...)")
	f.DurationVar(&demoFlags.rtt, "rtt", 0, "network RTT between bridges for every host (default: the control plane's per-rack RTTs, 3us and 6us)")
	f.Float64Var(&demoFlags.gbit, "gbit", 100, "fabric rate of one host-GPU pair in Gbit/s")
	f.StringVar(&demoFlags.traces, "traces", "", "directory of profiler traces (default ../shared/traces from the repository root; skipped if absent)")
	f.BoolVar(&demoFlags.quiet, "quiet", false, "no progress bar or progress lines on stderr")
	f.BoolVar(&demoFlags.bridge, "bridge", false, "run the workloads' fabric side through real bridge pairs too (slower; enumeration always uses them)")
	rootCmd.AddCommand(demoCmd)
}

func runDemo(cmd *cobra.Command, _ []string) error {
	if demoFlags.gbit <= 0 {
		return exitCodeError{2, fmt.Errorf("--gbit must be positive, got %v", demoFlags.gbit)}
	}
	if demoFlags.rtt < 0 {
		return exitCodeError{2, fmt.Errorf("--rtt must not be negative, got %v", demoFlags.rtt)}
	}
	traces := demoFlags.traces
	if traces == "" {
		traces = demo.DefaultTracesDir()
	} else if st, err := os.Stat(traces); err != nil || !st.IsDir() {
		return exitCodeError{2, fmt.Errorf("--traces %s: not a directory", traces)}
	}
	stderr := cmd.ErrOrStderr()
	var logw io.Writer = stderr
	if demoFlags.quiet {
		logw = nil
	}
	start := time.Now()
	var bar *progressbar.ProgressBar
	cfg := demo.Config{RTT: demoFlags.rtt, BytesPerSec: demoFlags.gbit * 1e9 / 8, TracesDir: traces, Log: logw, Bridge: demoFlags.bridge}
	// The bar redraws itself with carriage returns: only on a terminal.
	if f, ok := stderr.(*os.File); ok && !demoFlags.quiet && term.IsTerminal(int(f.Fd())) {
		cfg.Progress = func(done, total int, what string) {
			if bar == nil {
				bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(stderr),
					progressbar.OptionSetDescription("native and fabric runs"), progressbar.OptionShowCount(),
					progressbar.OptionSetWidth(30), progressbar.OptionClearOnFinish())
			}
			bar.Describe(fmt.Sprintf("%-34.34s", what))
			bar.Set(done)
		}
	}
	if cfg.Progress == nil && !demoFlags.quiet {
		// Not a terminal: a line at every quarter instead of a bar.
		next := 0
		cfg.Progress = func(done, total int, _ string) {
			if 4*done >= next*total {
				fmt.Fprintf(stderr, "demo: %d of %d native and fabric runs done\n", done, total)
				next = 4*done/total + 1
			}
		}
	}
	rep, err := demo.Run(cmd.Context(), cfg)
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		return exitCodeError{1, err}
	}
	out := cmd.OutOrStdout()
	if demoFlags.json {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep.Rows)
	}
	fmt.Fprintln(out, "hosts (GPUs lent by the control plane, enumerated through the fabric):")
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  host\tasked\tenumerated\tnet RTT\tconfig space\tGPUs")
	for _, h := range rep.Hosts {
		same := "identical"
		if !h.ConfigSame {
			same = "DIFFERS"
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%.0fus\t%s\t%s\n", h.Host, h.Asked, h.Enumerated, h.RTTus, same, compactGPUs(h.GPUs))
	}
	tw.Flush()
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\thost\tGPUs\tadded RTT\tnative\tfabric\toverhead\tmodel\t")
	for _, r := range rep.Rows {
		mp := "-"
		if r.ModelPct != nil {
			mp = fmt.Sprintf("%.2f%%", *r.ModelPct)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1fus\t%s\t%s\t%.2f%%\t%s\t\n", r.Workload, r.Host, r.GPUs, r.RTTus,
			fmtSeconds(r.NativeS), fmtSeconds(r.FabricS), r.OverheadPct, mp)
	}
	tw.Flush()
	for _, n := range rep.Notes {
		fmt.Fprintln(out, "note:", n)
	}
	if !demoFlags.quiet {
		fmt.Fprintf(stderr, "demo: done in %.1fs wall; times are virtual (%s)\n", time.Since(start).Seconds(), replay.Name)
	}
	return nil
}

func fmtSeconds(s float64) string {
	switch {
	case s >= 1:
		return fmt.Sprintf("%.4fs", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.3fms", s*1e3)
	}
	return fmt.Sprintf("%.1fus", s*1e6)
}

func compactGPUs(g []string) string {
	if len(g) <= 3 {
		return fmt.Sprint(g)
	}
	return fmt.Sprintf("[%s %s ... %s]", g[0], g[1], g[len(g)-1])
}
