package xdptest

import (
	"testing"

	switching "github.com/dxpu/dxpu/fabric/switch"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/xdp"
)

// Ports returns the topology's switch ports as the switch sees them.
func (t *Topology) Ports() map[string]switching.Port {
	return map[string]switching.Port{
		t.SwitchHost.Name: {Name: t.SwitchHost.Name, Index: uint32(t.SwitchHost.Index), MAC: t.SwitchHost.MAC},
		t.SwitchGPU.Name:  {Name: t.SwitchGPU.Name, Index: uint32(t.SwitchGPU.Index), MAC: t.SwitchGPU.MAC},
	}
}

// RunXDPSwitch loads the XDP switch in the switch namespace, attaches it to
// both switch ports, installs tbl, and attaches pass programs to the bridge
// ends (a veth drops frames redirected into it unless its peer runs XDP).
// Everything is detached when the test ends. Bridges then run in t.Host and
// t.GPU on HostIf and GPUIf.
func RunXDPSwitch(tb testing.TB, t *Topology, tbl *table.Table) *xdp.Switch {
	tb.Helper()
	var sw *xdp.Switch
	err := t.Switch.Do(func() error {
		var err error
		if sw, err = xdp.Load(xdp.Options{}); err != nil {
			return err
		}
		for _, ifc := range []Iface{t.SwitchHost, t.SwitchGPU} {
			mode, err := sw.Attach(ifc.Index)
			if err != nil {
				return err
			}
			tb.Logf("xdptest: switch program on %s in %s mode", ifc.Name, mode)
		}
		_, err = sw.Reconcile(tbl, t.Ports())
		return err
	})
	if sw != nil {
		tb.Cleanup(func() { sw.Close() })
	}
	if err != nil {
		tb.Fatalf("xdptest: starting the XDP switch: %v", err)
	}
	for _, end := range []struct {
		ns  NS
		ifc Iface
	}{{t.Host, t.HostIf}, {t.GPU, t.GPUIf}} {
		if err := end.ns.Do(func() error {
			l, _, err := xdp.AttachPass(end.ifc.Index)
			if err == nil {
				tb.Cleanup(func() { l.Close() })
			}
			return err
		}); err != nil {
			tb.Fatalf("xdptest: pass program on %s: %v", end.ifc.Name, err)
		}
	}
	return sw
}

// Reconcile installs tbl on a running switch (from the switch namespace,
// where the ports' ifindexes mean something).
func (t *Topology) Reconcile(sw *xdp.Switch, tbl *table.Table) error {
	return t.Switch.Do(func() error { _, err := sw.Reconcile(tbl, t.Ports()); return err })
}
