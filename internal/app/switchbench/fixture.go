package switchbench

import (
	"fmt"
	"net"
	"net/netip"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/tlp/encap"
)

// The forwarding decision is measured on one pair between two ports: a
// dxpu-over-Ethernet frame of two memory reads from the host bridge.
const (
	hostPort, gpuPort   = "sw1", "sw2"
	hostIndex, gpuIndex = 1, 2
	benchPair           = 1
)

var (
	hostMAC = net.HardwareAddr{2, 0, 0, 0, 1, 1}
	gpuMAC  = net.HardwareAddr{2, 0, 0, 0, 2, 1}
	// mrd is a 3-DW memory read header: enough for a frame.
	mrd = []byte{0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0x00, 0x0f, 0xfe, 0xe0, 0x00, 0x00}
)

// portMAC is the switch's own address on port i.
func portMAC(i byte) net.HardwareAddr { return net.HardwareAddr{2, 0x5e, 0, 0, 0, i} }

// newForwarder returns a forwarder with the pair's rules in force and a
// frame of the pair as it arrives from the host bridge on hostIndex.
func newForwarder() (*switching.Forwarder, []byte, error) {
	ports := map[string]switching.Port{
		hostPort: {Name: hostPort, Index: hostIndex, MAC: portMAC(hostIndex), IP: netip.AddrFrom4([4]byte{10, 0, 1, 1})},
		gpuPort:  {Name: gpuPort, Index: gpuIndex, MAC: portMAC(gpuIndex), IP: netip.AddrFrom4([4]byte{10, 0, 2, 1})},
	}
	t := &table.Table{Version: 1, Pairs: []table.Pair{{ID: benchPair,
		Host: table.Endpoint{Port: hostPort, MAC: hostMAC},
		GPU:  table.Endpoint{Port: gpuPort, MAC: gpuMAC}}}}
	rules, skipped, err := switching.Compile(t, ports, 0)
	if err == nil && len(skipped) > 0 {
		err = skipped[0]
	}
	if err != nil {
		return nil, nil, fmt.Errorf("bench switch: fixture table: %w", err)
	}
	f := switching.NewForwarder(0)
	f.SetPorts(ports)
	f.Update(rules)
	l2 := &encap.L2{Src: [6]byte(hostMAC), Dst: [6]byte(portMAC(hostIndex))}
	frame, err := encap.AppendDxpuEth(nil, l2, &encap.Fields{Type: encap.MsgTLP, PairID: benchPair, Seq: 7, Ack: 3, Flags: encap.FlagAck}, [][]byte{mrd, mrd})
	if err != nil {
		return nil, nil, fmt.Errorf("bench switch: fixture frame: %w", err)
	}
	return f, frame, nil
}
