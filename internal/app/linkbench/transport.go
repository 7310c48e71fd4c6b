package linkbench

import (
	"context"
	"fmt"
	"net/netip"
	"sync"

	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/udp"
)

// listenPair opens the host and GPU sides' transports on 127.0.0.1, each
// addressed to the other: a UDP socket each, or (shared) a pair on each
// side's udp.Mux, the data-plane port of `dxpu bridge agent` (steered
// reports whether both muxes steer the pair to a socket of its own). The
// runners close the transports; closeLink closes what is left (the
// muxes) once they have.
func listenPair(ctx context.Context, shared bool) (host, gpu driver.Transport, closeLink func(), steered bool, err error) {
	lo := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 0)
	if !shared {
		hc, err := udp.Listen(lo, netip.AddrPort{})
		if err != nil {
			return nil, nil, nil, false, err
		}
		gc, err := udp.Listen(lo, netip.AddrPort{})
		if err != nil {
			hc.Close()
			return nil, nil, nil, false, err
		}
		hc.SetPeer(gc.LocalAddr())
		gc.SetPeer(hc.LocalAddr())
		return hc, gc, func() {}, false, nil
	}
	hm, err := udp.ListenMux(lo)
	if err != nil {
		return nil, nil, nil, false, err
	}
	gm, err := udp.ListenMux(lo)
	if err != nil {
		hm.Close()
		return nil, nil, nil, false, err
	}
	// The pair ID the bridges put in their frames (bridge.Config's, 0
	// here) is what each mux hands its pair.
	const pair = 0
	hc, err := hm.Open(pair, gm.LocalAddr())
	var gc *udp.MuxConn
	if err == nil {
		gc, err = gm.Open(pair, hm.LocalAddr())
	}
	if err != nil {
		hm.Close()
		gm.Close()
		return nil, nil, nil, false, fmt.Errorf("linkbench: shared sockets: %w", err)
	}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, m := range []*udp.Mux{hm, gm} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = m.Run(rctx) }()
	}
	steered = hc.Steered() && gc.Steered()
	return hc, gc, func() { cancel(); hm.Close(); gm.Close(); wg.Wait() }, steered, nil
}
