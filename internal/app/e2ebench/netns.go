package e2ebench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/udp"
	"github.com/dxpu/dxpu/internal/app/labnet"
	"github.com/dxpu/dxpu/tlp/encap"
)

// ErrNamespaces is returned when namespace mode cannot run: not root, or
// the namespaces or the XDP switch could not be set up.
var ErrNamespaces = errors.New("e2ebench: namespace mode")

// The namespace network is a labnet fabric (host | XDP switch | GPU) with
// two pairs: 1, the bridges, at UDP port 4791 at both ends, and 2, the
// echo, at port 4792.
//
// The echo takes exactly the bridge frames' path: each echo datagram is a
// dxpu frame of pair 2 (a 40-byte dxpu header of type ACK, which the XDP
// program forwards like any frame but CONTROL, then the sequence number,
// 64 bytes in all), from host 10.78.1.2:4792 to the switch, out to gpu
// 10.78.2.2:4792, whose echo server sends it back the same way: the same
// veths, ports, program and kind of rule as pair 1, the same UDP socket
// path in both kernels.
const (
	nsBridgePort = 4791
	nsEchoPort   = 4792
	nsMaxMTU     = labnet.MaxMTU
)

// namespaces is the namespace network, switch running.
type namespaces struct {
	*labnet.Net
	log *slog.Logger
}

// requireRoot returns the error namespace mode gives without root.
func requireRoot(euid int) error {
	if err := labnet.RequireRoot(euid); err != nil {
		return fmt.Errorf("%w: %w: run with --loopback instead", ErrNamespaces, err)
	}
	return nil
}

// newNamespaces builds the namespace network for bridges of MTU mtu and
// starts the switch; close undoes everything, and so does a failure part
// way.
func newNamespaces(ctx context.Context, mtu int, log *slog.Logger) (network, error) {
	if err := requireRoot(os.Geteuid()); err != nil {
		return nil, err
	}
	if mtu > nsMaxMTU {
		return nil, fmt.Errorf("%w: bridge MTU %d: the veths carry %d-byte packets, so at most %d", ErrNamespaces, mtu, labnet.VethMTU, nsMaxMTU)
	}
	n, err := labnet.Start(ctx, labnet.Options{Pairs: []labnet.Pair{{ID: pairID, UDPPort: nsBridgePort}, {ID: echoPair, UDPPort: nsEchoPort}}, Log: log})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNamespaces, err)
	}
	return &namespaces{Net: n, log: log}, nil
}

func (n *namespaces) name() string { return "netns" }

// bridges opens the bridge pair's sockets: the host's in netns host, the
// GPU's in netns gpu, each sending to its switch port.
func (n *namespaces) bridges(busyPoll bool) (driver.Transport, driver.Transport, error) {
	var hc, gc *udp.Conn
	listen := listenFor(busyPoll)
	err := n.Host.Do(func() (err error) {
		hc, err = listen(n.HostAddr(nsBridgePort), n.HostSwitch())
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("e2ebench: host-side socket: %w", err)
	}
	err = n.GPU.Do(func() (err error) {
		gc, err = listen(n.GPUAddr(nsBridgePort), n.GPUSwitch())
		return err
	})
	if err != nil {
		hc.Close()
		return nil, nil, fmt.Errorf("e2ebench: GPU-side socket: %w", err)
	}
	return hc, gc, nil
}

// echo opens the echo of pair-2 dxpu frames from netns host through the
// switch to an echo server in netns gpu and back.
func (n *namespaces) echo() (*echoPath, error) {
	var sc, cc *net.UDPConn
	err := n.GPU.Do(func() (err error) {
		sc, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(n.GPUAddr(nsEchoPort)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("e2ebench: echo server: %w", err)
	}
	err = n.Host.Do(func() (err error) {
		cc, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(n.HostAddr(nsEchoPort)))
		return err
	})
	if err != nil {
		sc.Close()
		return nil, fmt.Errorf("e2ebench: echo client: %w", err)
	}
	return plainEcho(cc, sc, n.HostSwitch(), echoHeader()), nil
}

// echoHeader is the front of every echo datagram: a dxpu header of pair 2,
// type ACK, which the switch forwards as it forwards bridge frames.
func echoHeader() encap.Header { return ackHeader(echoPair) }

// ackHeader is a dxpu header of pair, type ACK.
func ackHeader(pair uint32) encap.Header {
	h := make(encap.Header, encap.HeaderLen)
	h.SetVersionFlags(encap.Version, 0)
	h.SetType(encap.MsgAck)
	h.SetPairID(pair)
	return h
}

// raw opens plain sockets at the bridges' endpoints (port 4791 in each end
// namespace); every datagram starts with a dxpu header of the bridges'
// pair, type ACK, so it crosses the switch by the bridges' rule.
func (n *namespaces) raw() (*udp.Conn, *udp.Conn, []byte, error) {
	hc, gc, err := n.bridges(false)
	if err != nil {
		return nil, nil, nil, err
	}
	return hc.(*udp.Conn), gc.(*udp.Conn), ackHeader(pairID), nil
}

// close logs what the switch forwarded, stops it, and removes the
// namespaces, links, programs and files; safe on a half-built network.
func (n *namespaces) close() {
	if c, err := n.PairCounters(context.Background()); err != nil {
		n.log.Warn("e2ebench: switch counters", "err", err)
	} else {
		for _, id := range []uint32{pairID, echoPair} {
			p := c[id]
			n.log.Info("e2ebench: switch forwarded", "pair", id, "to_gpu_frames", p.ToGPU.Frames, "to_gpu_bytes", p.ToGPU.Bytes,
				"to_host_frames", p.ToHost.Frames, "to_host_bytes", p.ToHost.Bytes)
		}
	}
	n.Close()
}

// busyEcho is echo with busy-polling sockets at both ends, on the same
// path.
func (n *namespaces) busyEcho() (*echoPath, error) {
	var sc, cc *udp.Conn
	err := n.GPU.Do(func() (err error) {
		sc, err = udp.ListenBusyPoll(n.GPUAddr(nsEchoPort), n.GPUSwitch())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("e2ebench: busy-poll echo server: %w", err)
	}
	err = n.Host.Do(func() (err error) {
		cc, err = udp.ListenBusyPoll(n.HostAddr(nsEchoPort), n.HostSwitch())
		return err
	})
	if err != nil {
		sc.Close()
		return nil, fmt.Errorf("e2ebench: busy-poll echo client: %w", err)
	}
	return busyEcho(cc, sc, echoHeader()), nil
}
