package xdp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/tlp/encap"
)

// UserspaceFigures are the results of BenchUserspace.
type UserspaceFigures struct {
	Mode       string  `json:"mode"`
	FrameBytes int     `json:"frame_bytes"`
	Sent       uint64  `json:"sent"`
	Forwarded  uint64  `json:"forwarded"`
	Seconds    float64 `json:"duration_s"`
	PPS        float64 `json:"packets_per_second"`
}

// The frames BenchUserspace sends: Ethernet, the dxpu header and one TLP
// with its 2-byte length, the TLP whole DWs and at least a 3-DW header,
// within the 1500-byte MTU the sandbox's veths get.
const (
	MinBenchFrameBytes = encap.EthHeaderLen + encap.HeaderLen + 2 + 12
	MaxBenchFrameBytes = MinBenchFrameBytes + (encap.EthHeaderLen+1500-MinBenchFrameBytes)/4*4
)

// UserspaceDriver starts a userspace switch over fwd on ports (inside the
// sandbox's namespace) and returns its run and close functions.
type UserspaceDriver func(fwd *switching.Forwarder, ports map[string]switching.Port) (run func(context.Context) error, close func() error, err error)

// PacketDriver is the AF_PACKET UserspaceDriver.
func PacketDriver(fwd *switching.Forwarder, ports map[string]switching.Port) (func(context.Context) error, func() error, error) {
	d, err := switching.NewPacketDriver(fwd, ports)
	if err != nil {
		return nil, nil, err
	}
	return d.Run, d.Close, nil
}

// BenchUserspace measures the packets per second the userspace switch
// forwards between two veths: a generator blasts frames of one pair into
// port swa's peer for duration, the switch forwards them out of swb, and a
// sink counts what arrives on swb's peer.
func BenchUserspace(mode string, driver UserspaceDriver, duration time.Duration, frameBytes int) (UserspaceFigures, error) {
	fig := UserspaceFigures{Mode: mode}
	if frameBytes < MinBenchFrameBytes || frameBytes > MaxBenchFrameBytes || frameBytes%4 != 0 {
		return fig, fmt.Errorf("xdp: %d-byte frames: want a multiple of 4 in %d..%d", frameBytes, MinBenchFrameBytes, MaxBenchFrameBytes)
	}
	hostMAC, gpuMAC := net.HardwareAddr{2, 0xbe, 0, 0, 1, 1}, net.HardwareAddr{2, 0xbe, 0, 0, 2, 2}
	sb, err := NewSandbox([]PortSpec{{Name: "swa", MAC: net.HardwareAddr{2, 0x5e, 0, 0, 0, 0xa}}, {Name: "swb", MAC: net.HardwareAddr{2, 0x5e, 0, 0, 0, 0xb}}})
	if err != nil {
		return fig, err
	}
	defer sb.Close()
	ports := sb.Ports()
	tb := &table.Table{Version: 1, Pairs: []table.Pair{{ID: 0x0000be,
		Host: table.Endpoint{Port: "swa", MAC: hostMAC}, GPU: table.Endpoint{Port: "swb", MAC: gpuMAC}}}}
	fwd := switching.NewForwarder(0)
	rules, _, err := switching.Compile(tb, ports, 0)
	if err != nil {
		return fig, err
	}
	fwd.SetPorts(ports)
	fwd.Update(rules)

	var run func(context.Context) error
	var closeDrv func() error
	var gen, sink *switching.PacketSocket
	if err := sb.Do(func() error {
		var err error
		if run, closeDrv, err = driver(fwd, ports); err != nil {
			return err
		}
		if gen, err = openPeer("sbx0p"); err != nil {
			return err
		}
		sink, err = openPeer("sbx1p")
		return err
	}); err != nil {
		return fig, err
	}
	defer closeDrv()
	defer gen.Close()
	defer sink.Close()

	payload := max(0, frameBytes-encap.FrameOverhead(false, false)-2) // one TLP: its 2-byte length
	payload = payload / 4 * 4
	tlp := make([]byte, max(12, payload))
	tlp[0] = 0x40
	frame, err := encap.AppendDxpuEth(nil, &encap.L2{Src: [6]byte(hostMAC), Dst: [6]byte(ports["swa"].MAC)}, &encap.Fields{PairID: 0x0000be}, [][]byte{tlp})
	if err != nil {
		return fig, err
	}
	fig.FrameBytes = len(frame)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); run(ctx) }()
	var received atomic.Uint64
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 16+65536)
		for ctx.Err() == nil {
			off, end, err := sink.ReadFrame(buf, 16)
			if err == nil && end-off == len(frame) {
				received.Add(1)
			} else if err != nil && !errors.Is(err, switching.ErrTimeout) {
				return
			}
		}
	}()
	time.Sleep(50 * time.Millisecond) // let the readers block before traffic starts
	start := time.Now()
	var sent uint64
	for time.Since(start) < duration {
		for i := 0; i < 64; i++ {
			if gen.WriteFrame(frame) == nil {
				sent++
			}
		}
	}
	elapsed := time.Since(start)
	time.Sleep(100 * time.Millisecond) // drain in-flight frames
	cancel()
	wg.Wait()
	fig.Sent, fig.Forwarded = sent, received.Load()
	fig.Seconds = elapsed.Seconds()
	if fig.Seconds > 0 {
		fig.PPS = float64(fig.Forwarded) / fig.Seconds
	}
	if fig.Forwarded == 0 {
		return fig, fmt.Errorf("xdp: userspace %s switch forwarded nothing", mode)
	}
	return fig, nil
}

func openPeer(name string) (*switching.PacketSocket, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, err
	}
	return switching.OpenPacketSocket(ifi.Index)
}
