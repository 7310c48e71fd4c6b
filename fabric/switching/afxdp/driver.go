package afxdp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	switching "github.com/dxpu/dxpu/fabric/switching"
)

// Driver runs a switching.Forwarder over one AF_XDP socket per port (RX
// queue 0), all driven by one goroutine: receive a batch, decide and
// rewrite each frame in its UMEM frame, copy forwarded frames into the
// egress socket's UMEM, kick TX.
type Driver struct {
	fwd      *switching.Forwarder
	SlowPath switching.SlowPathFunc
	ports    []*port
	byIndex  map[uint32]*port
}

type port struct {
	switching.Port
	socks []*Socket // one per RX queue; socks[0] also transmits
	dirty bool
}

// batch is how many frames a socket hands over per turn.
const batch = 64

// NewDriver opens a socket on every RX queue of every port (in the calling
// thread's network namespace): with RSS, frames arrive on all of them.
// Register each socket's FD in the XDP program's XSKMAP (Sockets) before
// traffic can arrive.
func NewDriver(fwd *switching.Forwarder, ports map[string]switching.Port, cfg Config) (*Driver, error) {
	d := &Driver{fwd: fwd, byIndex: map[uint32]*port{}}
	for name, p := range ports {
		p.Name = name
		pp := &port{Port: p}
		d.ports = append(d.ports, pp)
		d.byIndex[p.Index] = pp
		for q := 0; q < rxQueues(int(p.Index)); q++ {
			s, err := Open(int(p.Index), uint32(q), cfg)
			if err != nil && q > 0 && errors.Is(err, unix.EINVAL) {
				break // the driver allocates more queues than it uses (veth does)
			}
			if err != nil {
				d.Close()
				return nil, fmt.Errorf("afxdp: port %s queue %d: %w", name, q, err)
			}
			pp.socks = append(pp.socks, s)
		}
	}
	return d, nil
}

// MaxQueues bounds the RX queues used per port (the XSKMAP has 64 per port).
const MaxQueues = 64

// rxQueues returns the interface's allocated RX queue count (1 if
// unknown); NewDriver stops at the first queue that refuses a bind.
func rxQueues(ifindex int) int {
	l, err := netlink.LinkByIndex(ifindex)
	if err != nil || l.Attrs().NumRxQueues < 1 {
		return 1
	}
	return min(l.Attrs().NumRxQueues, MaxQueues)
}

// Queue is one socket of the driver: port ifindex, RX queue, socket.
type Queue struct {
	Ifindex uint32
	Queue   uint32
	Socket  *Socket
}

// Sockets lists every socket, for the XSKMAP.
func (d *Driver) Sockets() []Queue {
	var qs []Queue
	for _, p := range d.ports {
		for q, s := range p.socks {
			qs = append(qs, Queue{Ifindex: p.Index, Queue: uint32(q), Socket: s})
		}
	}
	return qs
}

// Close closes the sockets.
func (d *Driver) Close() error {
	var errs []error
	for _, p := range d.ports {
		for _, s := range p.socks {
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(errs...)
}

// Run forwards until ctx ends.
func (d *Driver) Run(ctx context.Context) error {
	var fds []unix.PollFd
	var owners []*port
	for _, p := range d.ports {
		for _, s := range p.socks {
			fds = append(fds, unix.PollFd{Fd: int32(s.FD()), Events: unix.POLLIN})
			owners = append(owners, p)
		}
	}
	socks := make([]*Socket, len(fds))
	i := 0
	for _, p := range d.ports {
		for _, s := range p.socks {
			socks[i] = s
			i++
		}
	}
	for ctx.Err() == nil {
		n, err := unix.Poll(fds, 100)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("afxdp: poll: %w", err)
		}
		if n == 0 {
			continue
		}
		for i, in := range owners {
			if fds[i].Revents&unix.POLLIN == 0 {
				continue
			}
			socks[i].Receive(batch, func(f *Frame) { d.handle(in, f) })
		}
		for _, p := range d.ports {
			if p.dirty {
				p.dirty = false
				if err := p.socks[0].Flush(); err != nil {
					slog.Debug("afxdp: flush", "port", p.Name, "err", err)
				}
			}
		}
	}
	return nil
}

func (d *Driver) handle(in *port, f *Frame) {
	res := d.fwd.Forward(f.Buf[:f.End], f.Off, in.Index)
	if res.Verdict == switching.VerdictSlowPath {
		// Slow path, inline: observe, then forward CONTROL messages
		// (the bridges' handshake) like data.
		if d.SlowPath != nil {
			d.SlowPath(in.Name, f.Buf[res.Off:f.End])
		}
		res = d.fwd.ForwardControl(f.Buf[:f.End], f.Off, in.Index)
	}
	switch res.Verdict {
	case switching.VerdictForward:
		out := d.byIndex[res.Egress]
		if out == nil {
			return
		}
		if err := out.socks[0].Send(f.Buf[res.Off:f.End]); err != nil {
			slog.Debug("afxdp: transmit dropped", "port", out.Name, "err", err)
			return
		}
		out.dirty = true
	}
}
