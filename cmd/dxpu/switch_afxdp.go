package main

import (
	"fmt"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/switching/afxdp"
	"github.com/dxpu/dxpu/xdp"
)

// newAFXDPDataPath is the userspace path over AF_XDP: the XDP program
// steers dxpu frames into per-port sockets, the Go forwarder decides.
func newAFXDPDataPath(ports map[string]switching.Port, udpPort uint16) (*fwdDataPath, error) {
	fwd := switching.NewForwarder(udpPort)
	fwd.SetPorts(ports)
	a, err := xdp.NewAFXDPSwitch(fwd, ports, xdp.Options{UDPPort: udpPort}, afxdp.Config{})
	if err != nil {
		return nil, fmt.Errorf("switch: %w (AF_XDP needs root and XDP)", err)
	}
	a.SetSlowPath(slowPathLogger)
	return &fwdDataPath{Forwarder: fwd, ports: ports, udpPort: udpPort, runFn: a.Run, closeFn: a.Close}, nil
}
