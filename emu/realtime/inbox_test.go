package realtime

import (
	"bytes"
	"testing"

	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// TestPostTLPOrderAndCopies: TLPs and functions posted from another
// goroutine arrive in the order posted, each TLP as it was when posted
// (the poster's buffer is reused at once), and in steady state posting
// and draining allocate nothing. (Not parallel: AllocsPerRun.)
func TestPostTLPOrderAndCopies(t *testing.T) {
	c := New(sim.New(1))
	var got [][]byte
	rx := pcie.ReceiverFunc(func(v tlp.View) { got = append(got, append([]byte(nil), v...)) })
	buf := make([]byte, 16)
	done := make(chan struct{})
	go func() {
		for i := range 3 {
			for j := range buf {
				buf[j] = byte(i)
			}
			c.PostTLP(rx, buf)
		}
		c.Post(func() { got = append(got, []byte("fn")) })
		close(done)
	}()
	<-done
	c.world.Lock()
	n := c.drain()
	c.world.Unlock()
	if n != 4 || len(got) != 4 {
		t.Fatalf("drained %d, delivered %d; want 4 and 4", n, len(got))
	}
	for i := range 3 {
		if !bytes.Equal(got[i], bytes.Repeat([]byte{byte(i)}, 16)) {
			t.Errorf("TLP %d arrived as %x", i, got[i])
		}
	}
	if string(got[3]) != "fn" {
		t.Errorf("the function posted last ran as %q", got[3])
	}
	sink := pcie.ReceiverFunc(func(tlp.View) {})
	allocs := testing.AllocsPerRun(100, func() {
		for range 32 {
			c.PostTLP(sink, buf)
		}
		c.drain()
	})
	if allocs != 0 {
		t.Errorf("posting and draining 32 TLPs allocates %v times", allocs)
	}
}

func BenchmarkPostTLP(b *testing.B) {
	c := New(sim.New(1))
	sink := pcie.ReceiverFunc(func(tlp.View) {})
	v := make([]byte, 268)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c.PostTLP(sink, v)
		if i%32 == 31 {
			c.drain()
		}
	}
}
