package xdp

import (
	"fmt"
	"net"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	switching "github.com/dxpu/dxpu/fabric/switching"
)

// Sandbox is a private network namespace with one veth per switch port,
// for running the program with BPF_PROG_TEST_RUN (replay, benchmarks):
// test runs and devmap entries need real interfaces. Everything runs on
// one OS thread inside the namespace; Close discards both.
type Sandbox struct {
	work  chan func()
	done  chan struct{}
	ports map[string]switching.Port
}

// PortSpec names a sandbox port and the addresses the switch uses on it.
type PortSpec = switching.Port

// NewSandbox creates the namespace and a veth for each port (name at most
// 15 bytes; MAC and IP as given, Index is filled in).
func NewSandbox(ports []PortSpec) (*Sandbox, error) {
	s := &Sandbox{work: make(chan func()), done: make(chan struct{}), ports: map[string]switching.Port{}}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		defer close(s.done)
		h, err := netns.New()
		if err != nil {
			errc <- fmt.Errorf("xdp: sandbox netns: %w", err)
			return
		}
		defer h.Close()
		for i, p := range ports {
			la := netlink.NewLinkAttrs()
			la.Name = p.Name
			if len(p.MAC) == 6 {
				la.HardwareAddr = p.MAC
			}
			if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: fmt.Sprintf("sbx%dp", i)}); err != nil {
				errc <- fmt.Errorf("xdp: sandbox port %q: %w", p.Name, err)
				return
			}
			for _, n := range []string{fmt.Sprintf("sbx%dp", i), p.Name} {
				l, err := netlink.LinkByName(n)
				if err == nil {
					err = netlink.LinkSetUp(l)
				}
				if err != nil {
					errc <- fmt.Errorf("xdp: sandbox port %q up: %w", n, err)
					return
				}
			}
			l, err := netlink.LinkByName(p.Name)
			if err != nil {
				errc <- err
				return
			}
			p.Index = uint32(l.Attrs().Index)
			if len(p.MAC) != 6 {
				p.MAC = append(net.HardwareAddr(nil), l.Attrs().HardwareAddr...)
			}
			s.ports[p.Name] = p
		}
		errc <- nil
		for fn := range s.work {
			fn()
		}
	}()
	if err := <-errc; err != nil {
		<-s.done
		return nil, err
	}
	return s, nil
}

// Ports returns the sandbox's ports by name, with their ifindexes.
func (s *Sandbox) Ports() map[string]switching.Port {
	out := make(map[string]switching.Port, len(s.ports))
	for k, v := range s.ports {
		out[k] = v
	}
	return out
}

// Do runs fn inside the namespace.
func (s *Sandbox) Do(fn func() error) error {
	errc := make(chan error, 1)
	s.work <- func() { errc <- fn() }
	return <-errc
}

// Close ends the namespace and its interfaces.
func (s *Sandbox) Close() {
	close(s.work)
	<-s.done
}
