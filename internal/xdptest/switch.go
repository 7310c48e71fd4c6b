package xdptest

import (
	"context"
	"testing"

	switching "github.com/dxpu/dxpu/fabric/switching"
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

// Forwarder returns a Go forwarder for the topology's switch ports with
// tbl compiled into it: the userspace switch's decision, ready for a driver.
func (t *Topology) Forwarder(tbl *table.Table) (*switching.Forwarder, error) {
	fwd := switching.NewForwarder(0)
	fwd.SetPorts(t.Ports())
	rules, _, err := switching.Compile(tbl, t.Ports(), 0)
	if err != nil {
		return nil, err
	}
	fwd.Update(rules)
	return fwd, nil
}

// XDPSwitch is the switch RunXDPSwitch starts: the XDP fast path and the
// Go slow path that forwards the bridges' CONTROL messages.
type XDPSwitch struct {
	*xdp.Switch
	// Slow is the slow path's forwarder; its counters count the CONTROL
	// messages it forwarded.
	Slow *switching.Forwarder
	topo *Topology
}

// Reconcile installs tbl in both paths.
func (s *XDPSwitch) Reconcile(tbl *table.Table) error {
	if err := s.topo.Reconcile(s.Switch, tbl); err != nil {
		return err
	}
	rules, _, err := switching.Compile(tbl, s.topo.Ports(), 0)
	if err != nil {
		return err
	}
	s.Slow.Update(rules)
	return nil
}

// RunXDPSwitch is what end-to-end tests with real bridges want: the XDP
// switch on both switch ports (RunXDPFastPath) plus its slow path, so that
// the bridges' handshake (CONTROL messages) crosses too. Bridges then run
// in t.Host and t.GPU on HostIf and GPUIf; everything stops when the test
// ends.
func RunXDPSwitch(tb testing.TB, t *Topology, tbl *table.Table) *XDPSwitch {
	tb.Helper()
	sw := RunXDPFastPath(tb, t, tbl)
	s := &XDPSwitch{Switch: sw, Slow: switching.NewForwarder(0), topo: t}
	s.Slow.SetPorts(t.Ports())
	if err := s.Reconcile(tbl); err != nil {
		tb.Fatalf("xdptest: %v", err)
	}
	var sp *xdp.SlowPath
	if err := t.Switch.Do(func() error {
		var err error
		sp, err = xdp.NewSlowPath(sw, s.Slow, t.Ports(), false)
		return err
	}); err != nil {
		tb.Fatalf("xdptest: slow path: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sp.Run(ctx); close(done) }()
	tb.Cleanup(func() { cancel(); <-done; sp.Close() })
	return s
}

// RunXDPFastPath loads the XDP switch in the switch namespace, attaches it
// to both switch ports, installs tbl, and attaches pass programs to the
// bridge ends (a veth drops frames redirected into it unless its peer runs
// XDP). No slow path: CONTROL messages and unknown pairs go to the switch
// namespace's stack. Everything is detached when the test ends.
func RunXDPFastPath(tb testing.TB, t *Topology, tbl *table.Table) *xdp.Switch {
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
