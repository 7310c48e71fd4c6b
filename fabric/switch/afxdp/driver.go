package afxdp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"golang.org/x/sys/unix"

	switching "github.com/dxpu/dxpu/fabric/switch"
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
	sock  *Socket
	dirty bool
}

// batch is how many frames a socket hands over per turn.
const batch = 64

// NewDriver opens the sockets (in the calling thread's network namespace).
// Register each socket's FD in the XDP program's XSKMAP (Sockets) before
// traffic can arrive.
func NewDriver(fwd *switching.Forwarder, ports map[string]switching.Port, cfg Config) (*Driver, error) {
	d := &Driver{fwd: fwd, byIndex: map[uint32]*port{}}
	for name, p := range ports {
		p.Name = name
		s, err := Open(int(p.Index), 0, cfg)
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("afxdp: port %s: %w", name, err)
		}
		pp := &port{Port: p, sock: s}
		d.ports = append(d.ports, pp)
		d.byIndex[p.Index] = pp
	}
	return d, nil
}

// Sockets returns each port's socket by ifindex.
func (d *Driver) Sockets() map[uint32]*Socket {
	m := make(map[uint32]*Socket, len(d.ports))
	for _, p := range d.ports {
		m[p.Index] = p.sock
	}
	return m
}

// Close closes the sockets.
func (d *Driver) Close() error {
	var errs []error
	for _, p := range d.ports {
		errs = append(errs, p.sock.Close())
	}
	return errors.Join(errs...)
}

// Run forwards until ctx ends.
func (d *Driver) Run(ctx context.Context) error {
	fds := make([]unix.PollFd, len(d.ports))
	for i, p := range d.ports {
		fds[i] = unix.PollFd{Fd: int32(p.sock.FD()), Events: unix.POLLIN}
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
		for i, p := range d.ports {
			if fds[i].Revents&unix.POLLIN == 0 {
				continue
			}
			in := p
			p.sock.Receive(batch, func(f *Frame) { d.handle(in, f) })
		}
		for _, p := range d.ports {
			if p.dirty {
				p.dirty = false
				if err := p.sock.Flush(); err != nil {
					slog.Debug("afxdp: flush", "port", p.Name, "err", err)
				}
			}
		}
	}
	return nil
}

func (d *Driver) handle(in *port, f *Frame) {
	res := d.fwd.Forward(f.Buf[:f.End], f.Off, in.Index)
	switch res.Verdict {
	case switching.VerdictForward:
		out := d.byIndex[res.Egress]
		if out == nil {
			return
		}
		if err := out.sock.Send(f.Buf[res.Off:f.End]); err != nil {
			slog.Debug("afxdp: transmit dropped", "port", out.Name, "err", err)
			return
		}
		out.dirty = true
	case switching.VerdictSlowPath:
		if d.SlowPath != nil {
			d.SlowPath(in.Name, f.Buf[res.Off:f.End])
		}
	}
}
