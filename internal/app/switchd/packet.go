package switchd

import (
	"fmt"
	"log/slog"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/switching/afxdp"
	"github.com/dxpu/dxpu/xdp"
)

// newPacketDataPath is the userspace path over AF_PACKET sockets.
func newPacketDataPath(ports map[string]switching.Port, udpPort uint16, log *slog.Logger) (*fwdDataPath, error) {
	fwd := switching.NewForwarder(udpPort)
	fwd.SetPorts(ports)
	drv, err := switching.NewPacketDriver(fwd, ports)
	if err != nil {
		return nil, fmt.Errorf("%w (AF_PACKET needs root or CAP_NET_RAW)", err)
	}
	drv.SlowPath = slowPathLogger(log)
	drv.Log = log
	return &fwdDataPath{Forwarder: fwd, ports: ports, runFn: drv.Run, closeFn: drv.Close}, nil
}

// newAFXDPDataPath is the userspace path over AF_XDP: the XDP program
// steers dxpu frames into per-port sockets, the Go forwarder decides.
func newAFXDPDataPath(ports map[string]switching.Port, udpPort uint16, log *slog.Logger) (*fwdDataPath, error) {
	fwd := switching.NewForwarder(udpPort)
	fwd.SetPorts(ports)
	a, err := xdp.NewAFXDPSwitch(fwd, ports, xdp.Options{UDPPort: udpPort}, afxdp.Config{})
	if err != nil {
		return nil, fmt.Errorf("switch: %w (AF_XDP needs root and XDP)", err)
	}
	a.SetSlowPath(slowPathLogger(log))
	return &fwdDataPath{Forwarder: fwd, ports: ports, runFn: a.Run, closeFn: a.Close}, nil
}
