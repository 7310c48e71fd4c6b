package realtime

import (
	"testing"

	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// A TLP the clock's own poll received goes straight to its receiver when
// nothing waits in the inbox, and behind what waits there otherwise: a
// runner's goroutine may have posted earlier TLPs before the clock took
// over its socket, and they must arrive first.
func TestDeliverPolledKeepsOrder(t *testing.T) {
	t.Parallel()
	c := New(sim.New(1))
	var got []byte
	rx := pcie.ReceiverFunc(func(v tlp.View) { got = append(got, v[0]) })
	c.world.Lock()
	defer c.world.Unlock()
	c.deliverPolled(rx, tlp.View{1})
	if string(got) != "\x01" {
		t.Fatalf("with an empty inbox, delivered %x at once, want 01", got)
	}
	c.PostTLP(rx, tlp.View{2})
	c.deliverPolled(rx, tlp.View{3})
	if string(got) != "\x01" {
		t.Fatalf("behind a posted TLP, delivered %x at once, want it to wait", got)
	}
	if n := c.drain(); n != 2 || string(got) != "\x01\x02\x03" {
		t.Fatalf("drained %d, delivered %x; want 2, 010203", n, got)
	}
}
