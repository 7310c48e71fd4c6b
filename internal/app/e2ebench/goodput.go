package e2ebench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/tlp"
)

// linkGoodput floods a lossless bridge pair on the transports open returns
// (configured as the measured path is) with 256-byte posted writes, as
// `dxpu bench link` does, for d, and returns the payload delivered per
// second in Gbit/s: the rate the link itself allows, against which the
// copies are judged; and the mean frame the host side sent (bytes over
// frames, its few ACK frames included). Each runner polls its socket for
// spin after its last frames, as the world's clocks poll theirs.
func linkGoodput(ctx context.Context, open func() (host, gpu driver.Transport, err error), cfg bridge.Config, d, spin time.Duration) (gbps float64, frameBytes int, err error) {
	ht, gt, err := open()
	if err != nil {
		return 0, 0, err
	}
	var rs [2]*driver.Runner
	for i, role := range []bridge.Role{bridge.RoleHost, bridge.RoleGPU} {
		c := cfg
		c.Role, c.PairID = role, pairID
		b, err := bridge.New(c)
		if err != nil {
			ht.Close()
			gt.Close()
			return 0, 0, fmt.Errorf("e2ebench: link bridge: %w", err)
		}
		rs[i] = driver.New(b, []driver.Transport{ht, gt}[i])
		rs[i].Spin = spin
	}
	var delivered atomic.Int64
	rs[1].OnTLP = func(v tlp.View) { delivered.Add(int64(v.PayloadLen())) }
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Run(rctx); err != nil && !errors.Is(err, context.Canceled) {
				errs <- err
			}
		}()
	}
	defer func() { cancel(); wg.Wait() }()
	// Handshake first, then the flood.
	up := time.Now().Add(10 * time.Second)
	for rs[0].State() != bridge.StateUp || rs[1].State() != bridge.StateUp {
		if time.Now().After(up) {
			return 0, 0, fmt.Errorf("e2ebench: link pair did not come up within 10s")
		}
		select {
		case err := <-errs:
			return 0, 0, fmt.Errorf("e2ebench: link pair: %w", err)
		case <-rs[0].Progress:
		case <-time.After(time.Millisecond):
		}
	}
	const batch = 16
	data := make([]byte, 256)
	bufs := make([][]byte, batch)
	for i := range bufs {
		p := tlp.Packet{Kind: tlp.MWr, Addr64: true, FirstBE: 0xf, LastBE: 0xf, Address: 0x10_0000_0000 + uint64(i)*4096, Data: data}
		bufs[i], _ = p.AppendTo(nil)
	}
	start := delivered.Load()
	t0 := time.Now()
	for time.Since(t0) < d {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		// Held, as a port streams a burst: the next batch fills the frame
		// this one leaves part-filled; what is held goes before a wait.
		n, err := rs[0].SendManyHeld(bufs)
		if err != nil && !errors.Is(err, bridge.ErrBusy) {
			return 0, 0, fmt.Errorf("e2ebench: link flood: %w", err)
		}
		if n < len(bufs) {
			rs[0].SendHeld()
			select {
			case <-rs[0].Progress:
			case <-time.After(time.Millisecond):
			}
		}
	}
	rs[0].SendHeld()
	el := time.Since(t0)
	if c := rs[0].Counters(); c.FramesSent > 0 {
		frameBytes = int(c.BytesSent / c.FramesSent)
	}
	return float64(delivered.Load()-start) * 8 / el.Seconds() / 1e9, frameBytes, nil
}
