package switchd

import (
	"log/slog"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
)

// udpDataPath relays dxpu datagrams through one UDP socket; it ignores
// endpoint ports: every pair is reachable through the socket.
type udpDataPath struct {
	fwdDataPath
}

func newUDPDataPath(listen string, udpPort uint16, log *slog.Logger) (*udpDataPath, error) {
	fwd := switching.NewForwarder(udpPort)
	drv, err := switching.NewUDPDriver(fwd, listen)
	if err != nil {
		return nil, err
	}
	drv.Log = log
	fwd.SetPorts(map[string]switching.Port{"udp": {Name: "udp", Index: switching.UDPIndex}})
	log.Info("switch: UDP relay", "listen", drv.Addr())
	return &udpDataPath{fwdDataPath{Forwarder: fwd, runFn: drv.Run, closeFn: drv.Close}}, nil
}

func (d *udpDataPath) apply(t *table.Table) ([]error, error) {
	ports := switching.SyntheticPorts(switching.PortNames(t))
	for n, p := range ports {
		p.Index = switching.UDPIndex
		ports[n] = p
	}
	// A pair whose endpoint has no IP cannot be relayed: left out, with
	// a warning naming it and its side (the manager refuses an agent's
	// bridge without bridge.ip; a raw-Ethernet box has none).
	t, noIP := switching.UDPReachable(t)
	skipped, err := install(d.Forwarder, t, ports)
	if err != nil {
		return nil, err
	}
	return append(noIP, skipped...), nil
}
