package vm

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/memlink"
	"github.com/dxpu/dxpu/bridge/udp"
	"github.com/dxpu/dxpu/internal/app/labnet"
)

// NetnsXDP is a Link through the XDP switch: the pair's host-side bridge
// sends from a socket in one network namespace, the GPU-side bridge from
// one in another, and the only way between them is a third namespace
// running the dxpu XDP switch (package labnet, the switch daemon's code).
// QEMU and both bridges' goroutines stay in the caller's namespace: a
// socket keeps the namespace it was opened in. Frame loss is injected in
// code on both transports (labnet's switch table has no drop knob).
type NetnsXDP struct {
	net   *labnet.Net
	ports map[uint32]uint16 // pair -> UDP port at both ends
}

// netnsBasePort is the first pair's UDP port at both ends.
const netnsBasePort = 4791

// StartNetnsXDP builds the namespaces and starts the switch with a table
// for pairs; Close removes it all. It needs root (labnet.ErrNamespaces
// otherwise).
func StartNetnsXDP(ctx context.Context, pairs []uint32, log *slog.Logger) (*NetnsXDP, error) {
	l := &NetnsXDP{ports: map[uint32]uint16{}}
	var lp []labnet.Pair
	for i, id := range pairs {
		port := uint16(netnsBasePort + i)
		l.ports[id] = port
		lp = append(lp, labnet.Pair{ID: id, UDPPort: port})
	}
	n, err := labnet.Start(ctx, labnet.Options{Pairs: lp, Log: log})
	if err != nil {
		return nil, fmt.Errorf("vm: %w", err)
	}
	l.net = n
	return l, nil
}

// Path reports "netns-xdp".
func (*NetnsXDP) Path() string { return "netns-xdp" }

// Open opens the host-side bridge's socket in the host namespace and the
// GPU-side bridge's in the GPU namespace, each aimed at its switch port.
func (l *NetnsXDP) Open(pair uint32, loss float64) (host, gpuSide driver.Transport, err error) {
	if err := checkLoss(loss); err != nil {
		return nil, nil, err
	}
	port, ok := l.ports[pair]
	if !ok {
		return nil, nil, fmt.Errorf("vm: pair %d is not in the switch's table", pair)
	}
	var hc, gc *udp.Conn
	if err := l.net.Host.Do(func() (err error) {
		hc, err = udp.Listen(l.net.HostAddr(port), l.net.HostSwitch())
		return err
	}); err != nil {
		return nil, nil, fmt.Errorf("vm: host-side bridge socket: %w", err)
	}
	if err := l.net.GPU.Do(func() (err error) {
		gc, err = udp.Listen(l.net.GPUAddr(port), l.net.GPUSwitch())
		return err
	}); err != nil {
		hc.Close()
		return nil, nil, fmt.Errorf("vm: GPU-side bridge socket: %w", err)
	}
	if loss == 0 {
		return hc, gc, nil
	}
	seed := uint64(time.Now().UnixNano())
	return driver.NewFaulty(hc, memlink.Faults{Loss: loss}, seed), driver.NewFaulty(gc, memlink.Faults{Loss: loss}, seed+1), nil
}

// Forwarded returns what the switch forwarded of pair each way.
func (l *NetnsXDP) Forwarded(ctx context.Context, pair uint32) (SwitchFlows, error) {
	c, err := l.net.PairCounters(ctx)
	if err != nil {
		return SwitchFlows{}, fmt.Errorf("vm: %w", err)
	}
	p := c[pair]
	return SwitchFlows{ToGPUFrames: p.ToGPU.Frames, ToGPUBytes: p.ToGPU.Bytes, ToHostFrames: p.ToHost.Frames, ToHostBytes: p.ToHost.Bytes}, nil
}

// Close stops the switch and removes the namespaces.
func (l *NetnsXDP) Close() { l.net.Close() }

// SwitchFlows is what a switch forwarded of the demo's pair, each way (on
// the fast path; the bridges' CONTROL messages take the slow path).
type SwitchFlows struct {
	ToGPUFrames  uint64 `json:"to_gpu_frames"`
	ToGPUBytes   uint64 `json:"to_gpu_bytes"`
	ToHostFrames uint64 `json:"to_host_frames"`
	ToHostBytes  uint64 `json:"to_host_bytes"`
}
