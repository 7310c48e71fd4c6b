// Package xdptest builds network namespaces for the switch's privileged
// tests: a scratch namespace with veth ports for BPF_PROG_TEST_RUN, and
// the three-namespace topology (host bridge | switch | GPU bridge) for
// end-to-end tests. It is a testing.TB wrapper around internal/netns:
// failures end the test, and everything is removed when the test ends.
// Callers gate on internal/privtest first.
package xdptest

import (
	"net"
	"testing"

	"github.com/dxpu/dxpu/internal/netns"
)

// NS is a network namespace owned by a test: Name, Handle and Do come from
// netns.NS.
type NS struct{ *netns.NS }

// Iface is an interface as a test needs it.
type Iface = netns.Iface

// NewNS creates an anonymous network namespace with lo up; it is removed
// (with the links made in it) when the test ends.
func NewNS(tb testing.TB, name string) NS {
	tb.Helper()
	ns, err := netns.New(name)
	if err != nil {
		tb.Fatalf("xdptest: %v", err)
	}
	tb.Cleanup(func() {
		if err := ns.Close(); err != nil {
			tb.Errorf("xdptest: %v", err)
		}
	})
	return NS{ns}
}

// AddPorts creates interfaces with the given names (and MACs, if given) in
// ns, up, and returns them. They are veths whose peers (name+"p") stay in
// ns: this kernel has no dummy driver, and BPF_PROG_TEST_RUN needs real
// ingress interfaces and devmap entries.
func AddPorts(tb testing.TB, ns NS, names []string, macs []net.HardwareAddr) []Iface {
	tb.Helper()
	var out []Iface
	for i, n := range names {
		end := netns.VethEnd{Name: n}
		if i < len(macs) {
			end.MAC = macs[i]
		}
		ifc, _, err := ns.AddVeth(end, nil, netns.VethEnd{Name: n + "p"}, 0)
		if err != nil {
			tb.Fatalf("xdptest: %v", err)
		}
		out = append(out, ifc)
	}
	return out
}
