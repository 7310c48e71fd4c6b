package switchbench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/xdp"
)

// Options of a run.
type Options struct {
	JSON       bool          // print one JSON object
	Repeat     uint32        // BPF_PROG_TEST_RUN repetitions per round
	Rounds     int           // rounds per program (median reported)
	Duration   time.Duration // userspace veth test duration
	FrameBytes int           // userspace test frame size
	NoXDP      bool          // skip the XDP and veth measurements (no root needed)
	// GoTime is how long the Go decision is measured at least (default 1s).
	GoTime time.Duration
}

// Report is what a run measured.
type Report struct {
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

// Run measures and prints the report to stdout.
func Run(o Options, stdout io.Writer) error {
	switch {
	case o.Repeat == 0:
		return apperr.Usage(fmt.Errorf("--repeat %d: must be positive", o.Repeat))
	case o.Rounds <= 0:
		return apperr.Usage(fmt.Errorf("--rounds %d: must be positive", o.Rounds))
	case o.FrameBytes < xdp.MinBenchFrameBytes || o.FrameBytes > xdp.MaxBenchFrameBytes || o.FrameBytes%4 != 0:
		// One TLP of whole DWs behind the headers, within the veths' MTU.
		return apperr.Usage(fmt.Errorf("--frame-bytes %d: want a multiple of 4 in %d..%d", o.FrameBytes, xdp.MinBenchFrameBytes, xdp.MaxBenchFrameBytes))
	}
	if o.GoTime <= 0 {
		o.GoTime = time.Second
	}
	var rep Report
	if !o.NoXDP {
		measureXDP(&rep, o)
	}
	var err error
	if rep.GoNsPerFrame, rep.GoAllocsPerFrame, err = goForward(o.GoTime); err != nil {
		return err
	}
	if o.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	rep.print(stdout)
	return nil
}

// measureXDP fills in the XDP and userspace figures, or why they are
// missing.
func measureXDP(rep *Report, o Options) {
	for _, udp := range []bool{false, true} {
		f, err := xdp.BenchProgram(udp, o.Repeat, o.Rounds)
		if err != nil {
			rep.XDPError = err.Error()
			break
		}
		rep.XDP = append(rep.XDP, f)
	}
	if len(rep.XDP) > 0 {
		rep.XDPNsPerFrame, rep.BaselineNsPerFrame, rep.Ratio = rep.XDP[0].XDPNsPerFrame, rep.XDP[0].BaselineNsPerFrame, rep.XDP[0].Ratio
	}
	var errs []string
	for _, m := range []struct {
		name string
		drv  xdp.UserspaceDriver
	}{{"packet", xdp.PacketDriver}, {"afxdp", xdp.AFXDPDriver}} {
		uf, err := xdp.BenchUserspace(m.name, m.drv, o.Duration, o.FrameBytes)
		if err != nil {
			errs = append(errs, m.name+": "+err.Error())
			continue
		}
		rep.Userspace = append(rep.Userspace, uf)
	}
	rep.UserspaceError = strings.Join(errs, "; ")
}

func (rep *Report) print(out io.Writer) {
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
}
