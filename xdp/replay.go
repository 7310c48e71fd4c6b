package xdp

import (
	"fmt"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
)

// Replay runs frames through the XDP program with BPF_PROG_TEST_RUN in a
// sandbox whose ports are given (name, MAC, IP; ifindexes are assigned),
// after reconciling the table. It returns one outcome per frame (Action and,
// for redirects, Frame) and the sandbox's ports. Frames shorter than an
// Ethernet header, which BPF_PROG_TEST_RUN refuses and no NIC delivers, get
// XDP_PASS without running the program.
func Replay(t *table.Table, ports []PortSpec, opts Options, frames []switching.ReplayFrame) ([]switching.Outcome, map[string]switching.Port, error) {
	out := make([]switching.Outcome, 0, len(frames))
	sbPorts, err := ReplayStream(t, ports, opts, func(step func(switching.ReplayFrame) (switching.Outcome, error)) error {
		for i, f := range frames {
			o, err := step(f)
			if err != nil {
				return fmt.Errorf("frame %d: %w", i+1, err)
			}
			out = append(out, o)
		}
		return nil
	})
	return out, sbPorts, err
}

// ReplayStream is Replay for frames that come one at a time (a capture read
// record by record): once the sandbox and the program are ready, it calls
// run with step, which switches one frame, and returns run's error. step's
// outcome keeps no reference to the frame it was given.
func ReplayStream(t *table.Table, ports []PortSpec, opts Options, run func(step func(switching.ReplayFrame) (switching.Outcome, error)) error) (map[string]switching.Port, error) {
	sb, err := NewSandbox(ports)
	if err != nil {
		return nil, err
	}
	defer sb.Close()
	sbPorts := sb.Ports()
	err = sb.Do(func() error {
		sw, err := Load(opts)
		if err != nil {
			return err
		}
		defer sw.Close()
		skipped, err := sw.Reconcile(t, sbPorts)
		if err != nil {
			return err
		}
		if len(skipped) > 0 {
			return fmt.Errorf("xdp: replay table: %v", skipped[0])
		}
		return run(func(f switching.ReplayFrame) (switching.Outcome, error) {
			if len(f.Data) < 14 {
				return switching.Outcome{Action: switching.XDPPass}, nil
			}
			act, data, err := sw.TestRun(f.Data, sbPorts[f.Port].Index)
			if err != nil {
				return switching.Outcome{}, err
			}
			o := switching.Outcome{Action: act}
			if act == switching.XDPRedirect {
				o.Frame = data
			}
			return o, nil
		})
	})
	return sbPorts, err
}
