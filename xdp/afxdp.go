package xdp

import (
	"context"
	"errors"
	"fmt"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/switching/afxdp"
	"github.com/dxpu/dxpu/fabric/table"
)

// AFXDPSwitch is the userspace switch over AF_XDP (mode afxdp): the switch
// program, loaded with AllToXSK, steers every dxpu frame into its port's
// AF_XDP socket (copy mode, one per RX queue) and the Go forwarder decides. Other
// frames go to the kernel stack.
type AFXDPSwitch struct {
	sw  *Switch
	drv *afxdp.Driver
}

// NewAFXDPSwitch loads, attaches and binds everything on ports (in the
// calling thread's network namespace).
func NewAFXDPSwitch(fwd *switching.Forwarder, ports map[string]switching.Port, opts Options, cfg afxdp.Config) (*AFXDPSwitch, error) {
	opts.AllToXSK = true
	sw, err := Load(opts)
	if err != nil {
		return nil, err
	}
	a := &AFXDPSwitch{sw: sw}
	// An empty table installs the ports (their XSKMAP slots) only.
	if _, err := sw.Reconcile(&table.Table{}, ports); err != nil {
		sw.Close()
		return nil, err
	}
	if a.drv, err = afxdp.NewDriver(fwd, ports, cfg); err != nil {
		sw.Close()
		return nil, err
	}
	for _, q := range a.drv.Sockets() {
		if err := sw.SetXSK(int(q.Ifindex), q.Queue, q.Socket.FD()); err != nil {
			a.Close()
			return nil, err
		}
	}
	for name, p := range ports {
		if _, err := sw.Attach(int(p.Index)); err != nil {
			a.Close()
			return nil, fmt.Errorf("xdp: port %s: %w", name, err)
		}
	}
	a.drv.SlowPath = func(string, []byte) {}
	return a, nil
}

// SetSlowPath sets where slow-path frames go.
func (a *AFXDPSwitch) SetSlowPath(fn switching.SlowPathFunc) { a.drv.SlowPath = fn }

// Run forwards until ctx ends.
func (a *AFXDPSwitch) Run(ctx context.Context) error { return a.drv.Run(ctx) }

// Close detaches and closes sockets and maps.
func (a *AFXDPSwitch) Close() error {
	var errs []error
	errs = append(errs, a.sw.Close())
	if a.drv != nil {
		errs = append(errs, a.drv.Close())
	}
	return errors.Join(errs...)
}

// AFXDPDriver is the AF_XDP UserspaceDriver.
func AFXDPDriver(fwd *switching.Forwarder, ports map[string]switching.Port) (func(context.Context) error, func() error, error) {
	a, err := NewAFXDPSwitch(fwd, ports, Options{}, afxdp.Config{})
	if err != nil {
		return nil, nil, err
	}
	return a.Run, a.Close, nil
}
