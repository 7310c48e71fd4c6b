package main

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/spf13/cobra"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/internal/switchtest"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/xdp"
)

var benchSwitchFlags struct {
	jsonOut    bool
	repeat     uint32
	rounds     int
	duration   time.Duration
	frameBytes int
	noXDP      bool
}

var benchSwitchCmd = &cobra.Command{
	Use:   "switch",
	Short: "Measure the switch: XDP program vs a minimal redirect program, and the userspace path",
	Long: `switch measures, in one run:

  - ns per frame of the XDP switch program with BPF_PROG_TEST_RUN (repeat),
    beside the minimal redirect program (the kernel sample xdp_redirect_map:
    bounds check, per-CPU counter, MAC swap, devmap redirect) on the same
    frame, for dxpu over Ethernet and over UDP: xdp_ns_per_frame,
    baseline_ns_per_frame and their ratio (target: at most 2);
  - ns per frame of the Go forwarding decision (in process);
  - packets per second of the userspace switch (AF_PACKET and AF_XDP in
    copy mode) between two veths.

The XDP and veth figures need root; without it they are reported as errors
and the Go figure is still measured. Figures are medians over --rounds.`,
	Args: cobra.NoArgs,
	RunE: runBenchSwitch,
}

func init() {
	f := benchSwitchCmd.Flags()
	fl := &benchSwitchFlags
	f.BoolVar(&fl.jsonOut, "json", false, "print one JSON object")
	f.Uint32Var(&fl.repeat, "repeat", 1_000_000, "BPF_PROG_TEST_RUN repetitions per round")
	f.IntVar(&fl.rounds, "rounds", 7, "rounds per program (median reported)")
	f.DurationVar(&fl.duration, "duration", 2*time.Second, "userspace veth test duration")
	f.IntVar(&fl.frameBytes, "frame-bytes", 128, "userspace test frame size")
	f.BoolVar(&fl.noXDP, "no-xdp", false, "skip the XDP and veth measurements (no root needed)")
	benchCmd.AddCommand(benchSwitchCmd)
}

type benchSwitchReport struct {
	XDPNsPerFrame      float64                `json:"xdp_ns_per_frame,omitempty"`
	BaselineNsPerFrame float64                `json:"baseline_ns_per_frame,omitempty"`
	Ratio              float64                `json:"ratio,omitempty"`
	XDP                []xdp.BenchFigures     `json:"xdp,omitempty"`
	XDPError           string                 `json:"xdp_error,omitempty"`
	GoNsPerFrame       float64                `json:"go_ns_per_frame"`
	GoAllocsPerFrame   int64                  `json:"go_allocs_per_frame"`
	Userspace          []xdp.UserspaceFigures `json:"userspace,omitempty"`
	UserspaceError     string                 `json:"userspace_error,omitempty"`
}

func runBenchSwitch(cmd *cobra.Command, _ []string) error {
	fl := benchSwitchFlags
	if fl.repeat == 0 || fl.rounds <= 0 {
		return exitCodeError{2, fmt.Errorf("bench switch: --repeat and --rounds must be positive")}
	}
	var rep benchSwitchReport
	if !fl.noXDP {
		for _, udp := range []bool{false, true} {
			f, err := xdp.BenchProgram(udp, fl.repeat, fl.rounds)
			if err != nil {
				rep.XDPError = err.Error()
				break
			}
			rep.XDP = append(rep.XDP, f)
		}
		if len(rep.XDP) > 0 {
			rep.XDPNsPerFrame, rep.BaselineNsPerFrame, rep.Ratio = rep.XDP[0].XDPNsPerFrame, rep.XDP[0].BaselineNsPerFrame, rep.XDP[0].Ratio
		}
		for _, m := range []struct {
			name string
			drv  xdp.UserspaceDriver
		}{{"packet", xdp.PacketDriver}, {"afxdp", xdp.AFXDPDriver}} {
			uf, err := xdp.BenchUserspace(m.name, m.drv, fl.duration, fl.frameBytes)
			if err != nil {
				rep.UserspaceError += m.name + ": " + err.Error() + "; "
				continue
			}
			rep.Userspace = append(rep.Userspace, uf)
		}
	}
	rep.GoNsPerFrame, rep.GoAllocsPerFrame = benchGoForward()

	out := cmd.OutOrStdout()
	if fl.jsonOut {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	for _, f := range rep.XDP {
		fmt.Fprintf(out, "xdp %-9s switch %5.1f ns/frame, baseline redirect %5.1f ns/frame, ratio %.2f (target <= 2)\n",
			f.Frame, f.XDPNsPerFrame, f.BaselineNsPerFrame, f.Ratio)
	}
	if rep.XDPError != "" {
		fmt.Fprintf(out, "xdp: not measured: %s\n", rep.XDPError)
	}
	fmt.Fprintf(out, "go  decision       %5.1f ns/frame, %d allocs/frame\n", rep.GoNsPerFrame, rep.GoAllocsPerFrame)
	for _, u := range rep.Userspace {
		fmt.Fprintf(out, "userspace %s on veth: %.0f packets/s (%d-byte frames, %d of %d forwarded)\n", u.Mode, u.PPS, u.FrameBytes, u.Forwarded, u.Sent)
	}
	if rep.UserspaceError != "" {
		fmt.Fprintf(out, "userspace: not measured: %s\n", rep.UserspaceError)
	}
	return nil
}

// benchGoForward measures Forward on a dxpu-eth frame of the fixture.
func benchGoForward() (float64, int64) {
	index := map[string]uint32{switchtest.P1: 1, switchtest.P2: 2, switchtest.P3: 3}
	ports := switchtest.Ports(index)
	rules, _, _ := switching.Compile(switchtest.Table(), ports, 0)
	f := switching.NewForwarder(0)
	f.SetPorts(ports)
	f.Update(rules)
	frame := switchtest.Frame(switchtest.MAC(1, 1), switchtest.PortMAC(1), -1, nil, encap.MsgTLP, switchtest.PairPlain, false)
	buf := make([]byte, switching.Headroom+len(frame))
	r := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			copy(buf[switching.Headroom:], frame)
			f.Forward(buf, switching.Headroom, 1)
		}
	})
	return float64(r.NsPerOp()), r.AllocsPerOp()
}
