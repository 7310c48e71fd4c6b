package switchd

import (
	"context"
	"fmt"
	"log/slog"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/xdp"
)

// xdpDataPath is the XDP program on every port, with a Go slow path for
// CONTROL frames and unknown pairs.
type xdpDataPath struct {
	*xdp.Switch
	ports map[string]switching.Port
	slow  *switching.Forwarder
	sp    *xdp.SlowPath
}

func newXDPDataPath(ports map[string]switching.Port, opts xdp.Options, xsk bool, log *slog.Logger) (*xdpDataPath, error) {
	sw, err := xdp.Load(opts)
	if err != nil {
		return nil, fmt.Errorf("switch: %w (XDP needs root and a kernel with BPF; try --mode packet or udp)", err)
	}
	d := &xdpDataPath{Switch: sw, ports: ports, slow: switching.NewForwarder(opts.UDPPort)}
	d.slow.SetPorts(ports)
	// The ports must be in the maps before AF_XDP sockets can be registered.
	if _, err := sw.Reconcile(&table.Table{}, ports); err != nil {
		sw.Close()
		return nil, err
	}
	if d.sp, err = xdp.NewSlowPath(sw, d.slow, ports, xsk); err != nil {
		sw.Close()
		return nil, err
	}
	d.sp.Observe = slowPathLogger(log)
	for name, p := range ports {
		mode, err := sw.Attach(int(p.Index))
		if err != nil {
			d.close()
			return nil, err
		}
		log.Info("switch: XDP attached", "port", name, "mode", mode)
	}
	return d, nil
}

// apply puts t in force in the program's maps, then in the slow path's
// forwarder.
func (d *xdpDataPath) apply(t *table.Table) ([]error, error) {
	skipped, err := d.Reconcile(t, d.ports)
	if err != nil {
		return skipped, err
	}
	if _, err := install(d.slow, t, d.ports); err != nil {
		return skipped, err
	}
	return skipped, nil
}

// PairCounters and PortCounters add the slow path's forwarding (CONTROL
// messages) to the program's counters.
func (d *xdpDataPath) PairCounters(fn func(id uint32, c switching.Counters)) error {
	return switching.SumSources{d.Switch, d.slow}.PairCounters(fn)
}

func (d *xdpDataPath) PortCounters(fn func(port string, c switching.Counters)) error {
	return switching.SumSources{d.Switch, d.slow}.PortCounters(fn)
}

func (d *xdpDataPath) run(ctx context.Context) error { return d.sp.Run(ctx) }

func (d *xdpDataPath) close() error {
	err := d.Switch.Close() // detach first: nothing redirects to the sockets any more
	d.sp.Close()
	return err
}
