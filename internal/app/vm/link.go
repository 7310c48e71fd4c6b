package vm

import (
	"fmt"
	"math"
	"net/netip"
	"time"

	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/memlink"
	"github.com/dxpu/dxpu/bridge/udp"
)

// A Link carries a bridge pair's frames between the host-side bridge (the
// one behind QEMU) and the GPU-side bridge, both run by this process.
type Link interface {
	// Path names the way the frames take, as DemoResult.Path reports it
	// ("loopback", "netns-xdp").
	Path() string
	// Open returns the host-side and GPU-side transports of pair, losing
	// the fraction loss (0 <= loss < 1) of the frames each way wherever
	// this path drops them. Each transport is closed by its user.
	Open(pair uint32, loss float64) (host, gpuSide driver.Transport, err error)
}

// Loopback is a Link over loopback UDP in this network namespace; frame
// loss is injected in code on both transports.
type Loopback struct {
	// Seed seeds the loss (0: from the clock).
	Seed uint64
}

// Path reports "loopback".
func (Loopback) Path() string { return "loopback" }

// Open opens two UDP sockets on 127.0.0.1 aimed at each other.
func (l Loopback) Open(_ uint32, loss float64) (host, gpuSide driver.Transport, err error) {
	seed := l.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	return loopbackPair(loss, seed)
}

// checkLoss rejects a loss fraction no link can inject.
func checkLoss(loss float64) error {
	if math.IsNaN(loss) || loss < 0 || loss >= 1 {
		return fmt.Errorf("vm: frame loss %v: want 0 or more and less than 1", loss)
	}
	return nil
}

// loopbackPair returns the two ends of a bridge pair over loopback UDP,
// wrapped to drop loss of the frames each sends.
func loopbackPair(loss float64, seed uint64) (host, gpuSide driver.Transport, err error) {
	if err := checkLoss(loss); err != nil {
		return nil, nil, err
	}
	hc, err := udp.Listen(netip.MustParseAddrPort("127.0.0.1:0"), netip.AddrPort{})
	if err != nil {
		return nil, nil, fmt.Errorf("vm: %w", err)
	}
	gc, err := udp.Listen(netip.MustParseAddrPort("127.0.0.1:0"), hc.LocalAddr())
	if err != nil {
		hc.Close()
		return nil, nil, fmt.Errorf("vm: %w", err)
	}
	hc.SetPeer(gc.LocalAddr())
	if loss == 0 {
		return hc, gc, nil
	}
	return driver.NewFaulty(hc, memlink.Faults{Loss: loss}, seed), driver.NewFaulty(gc, memlink.Faults{Loss: loss}, seed+1), nil
}
