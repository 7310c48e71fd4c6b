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
	sb, err := NewSandbox(ports)
	if err != nil {
		return nil, nil, err
	}
	defer sb.Close()
	sbPorts := sb.Ports()
	out := make([]switching.Outcome, len(frames))
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
		for i, f := range frames {
			if len(f.Data) < 14 {
				out[i] = switching.Outcome{Action: switching.XDPPass}
				continue
			}
			act, data, err := sw.TestRun(f.Data, sbPorts[f.Port].Index)
			if err != nil {
				return fmt.Errorf("frame %d: %w", i+1, err)
			}
			out[i] = switching.Outcome{Action: act}
			if act == switching.XDPRedirect {
				out[i].Frame = data
			}
		}
		return nil
	})
	return out, sbPorts, err
}
