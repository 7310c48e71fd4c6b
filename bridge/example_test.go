package bridge_test

import (
	"fmt"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/tlp"
)

// The sans-I/O loop: two bridges joined back to back by plain function
// calls, with time advanced by hand. A driver does the same with sockets
// and a timer.
func Example() {
	host, _ := bridge.New(bridge.Config{Role: bridge.RoleHost, PairID: 7, Seed: 1})
	gpu, _ := bridge.New(bridge.Config{Role: bridge.RoleGPU, PairID: 7, Seed: 2})
	buf := make([]byte, 1472)
	var now time.Duration
	// pump moves every due frame across and hands the GPU side its TLPs.
	pump := func() {
		for moved := true; moved; {
			moved = false
			for _, p := range [][2]*bridge.Bridge{{host, gpu}, {gpu, host}} {
				for n := p[0].NextFrame(now, buf); n > 0; n = p[0].NextFrame(now, buf) {
					_ = p[1].HandleFrame(now, buf[:n])
					moved = true
				}
			}
			for v, ok := gpu.NextTLP(bridge.AcceptAll); ok; v, ok = gpu.NextTLP(bridge.AcceptAll) {
				fmt.Printf("GPU side got %v at %#x, %d bytes\n", v.Kind(), v.Address(), v.PayloadLen())
				_ = gpu.Release(v.Class(), 1, v.DataCredits())
			}
		}
	}
	pump() // HELLO, HELLO-ACK, HELLO-ACK
	fmt.Println("host", host.State(), "gpu", gpu.State())

	w := tlp.Packet{Kind: tlp.MWr, FirstBE: 0xf, LastBE: 0xf, Address: 0x1000, Data: make([]byte, 64)}
	raw, _ := w.AppendTo(nil)
	_ = host.HandleTLP(now, raw)
	pump()
	now += 50 * time.Microsecond // the ack and the credit update are due
	pump()
	fmt.Println("unacknowledged:", host.Pending())
	// Output:
	// host up gpu up
	// GPU side got MWr at 0x1000, 64 bytes
	// unacknowledged: 0
}
