package switching_test

import (
	"testing"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/internal/switchtest"
	"github.com/dxpu/dxpu/tlp/encap"
)

// TestReplayOutcomes: replay names the egress port and gives the XDP
// action of each verdict (slow path and pass: XDP_PASS).
func TestReplayOutcomes(t *testing.T) {
	for v, want := range map[switching.Verdict]uint32{switching.VerdictDrop: switching.XDPDrop, switching.VerdictForward: switching.XDPRedirect,
		switching.VerdictSlowPath: switching.XDPPass, switching.VerdictPass: switching.XDPPass} {
		if got := v.XDPAction(); got != want {
			t.Errorf("%v.XDPAction() = %d, want %d", v, got, want)
		}
	}
	tb := switchtest.Table()
	ports := switching.SyntheticPorts(switching.PortNames(tb))
	rules, _, _ := switching.Compile(tb, ports, 0)
	f := switching.NewForwarder(0)
	f.SetPorts(ports)
	f.Update(rules)
	var frames [][]byte
	var want []string
	for _, p := range tb.Pairs[:3] {
		frames = append(frames, switchtest.Frame(p.Host.MAC, switchtest.PortMAC(1), -1, nil, encap.MsgTLP, p.ID, false))
		want = append(want, p.GPU.Port)
		frames = append(frames, switchtest.Frame(p.GPU.MAC, switchtest.PortMAC(2), -1, nil, encap.MsgTLP, p.ID, false))
		want = append(want, p.Host.Port)
	}
	out := f.Replay(switching.AssignPorts(tb, frames, "none"), ports)
	for i, o := range out {
		if o.Verdict != switching.VerdictForward || o.Action != switching.XDPRedirect || o.Egress != want[i] {
			t.Errorf("frame %d: %v action %d egress %q, want forward/%d to %q", i, o.Verdict, o.Action, o.Egress, switching.XDPRedirect, want[i])
		}
	}
}
