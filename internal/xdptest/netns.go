// Package xdptest builds network namespaces for the switch's privileged
// tests: a scratch namespace with dummy ports for BPF_PROG_TEST_RUN, and
// the three-namespace topology (host bridge | switch | GPU bridge) for
// end-to-end tests. Callers gate on internal/privtest first.
package xdptest

import (
	"fmt"
	"net"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// NS is a network namespace owned by a test.
type NS struct {
	Name   string
	Handle netns.NsHandle
}

// Do runs fn on an OS thread inside the namespace and returns its error.
// The thread is discarded afterwards, so nothing leaks into other
// goroutines.
func (ns NS) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if err := netns.Set(ns.Handle); err != nil {
			errc <- fmt.Errorf("xdptest: entering netns %s: %w", ns.Name, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// NewNS creates an anonymous network namespace with lo up; it is removed
// when the test ends.
func NewNS(tb testing.TB, name string) NS {
	tb.Helper()
	hc := make(chan netns.NsHandle, 1)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		h, err := netns.New() // switches this thread; it dies with the goroutine
		if err != nil {
			errc <- err
			return
		}
		lo, err := netlink.LinkByName("lo")
		if err == nil {
			err = netlink.LinkSetUp(lo)
		}
		if err != nil {
			h.Close()
			errc <- err
			return
		}
		hc <- h
	}()
	select {
	case err := <-errc:
		tb.Fatalf("xdptest: creating netns %s: %v", name, err)
	case h := <-hc:
		tb.Cleanup(func() { h.Close() })
		return NS{Name: name, Handle: h}
	}
	return NS{}
}

// Iface is an interface as a test needs it.
type Iface struct {
	Name  string
	Index int
	MAC   net.HardwareAddr
}

// AddPorts creates interfaces with the given names (and MACs, if given) in
// ns, up, and returns them. They are veths whose peers (name+"p") stay in
// ns: this kernel has no dummy driver, and BPF_PROG_TEST_RUN needs real
// ingress interfaces and devmap entries.
func AddPorts(tb testing.TB, ns NS, names []string, macs []net.HardwareAddr) []Iface {
	tb.Helper()
	var out []Iface
	err := ns.Do(func() error {
		for i, n := range names {
			la := netlink.NewLinkAttrs()
			la.Name = n
			if i < len(macs) {
				la.HardwareAddr = macs[i]
			}
			if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: n + "p"}); err != nil {
				return fmt.Errorf("adding veth %s: %w", n, err)
			}
			for _, name := range []string{n + "p", n} {
				l, err := netlink.LinkByName(name)
				if err == nil {
					err = netlink.LinkSetUp(l)
				}
				if err != nil {
					return fmt.Errorf("setting %s up: %w", name, err)
				}
			}
			l, err := netlink.LinkByName(n)
			if err != nil {
				return err
			}
			out = append(out, Iface{Name: n, Index: l.Attrs().Index, MAC: l.Attrs().HardwareAddr})
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("xdptest: %v", err)
	}
	return out
}
