package switchd

import (
	"fmt"
	"net"
	"net/netip"

	switching "github.com/dxpu/dxpu/fabric/switching"
)

// resolvePorts resolves interface names to ports: ifindex, MAC and first
// IPv4 address.
func resolvePorts(names []string) (map[string]switching.Port, error) {
	ports := map[string]switching.Port{}
	for _, n := range names {
		ifi, err := net.InterfaceByName(n)
		if err != nil {
			return nil, fmt.Errorf("--port %s: %w", n, err)
		}
		if len(ifi.HardwareAddr) != 6 {
			return nil, fmt.Errorf("--port %s: not an Ethernet interface", n)
		}
		p := switching.Port{Name: n, Index: uint32(ifi.Index), MAC: ifi.HardwareAddr}
		if addrs, err := ifi.Addrs(); err == nil {
			for _, a := range addrs {
				if pfx, err := netip.ParsePrefix(a.String()); err == nil && pfx.Addr().Is4() {
					p.IP = pfx.Addr()
					break
				}
			}
		}
		ports[n] = p
	}
	return ports, nil
}
