package vpair_test

import (
	"fmt"
	"time"

	"github.com/dxpu/dxpu/bridge/vpair"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// A host root complex reads 8 bytes from a GPU through a bridge pair with
// 2 us of one-way delay and 100 Gb/s links, in virtual time.
func ExampleNewPair() {
	s := sim.New(1)
	p, err := vpair.NewPair(s, vpair.PairConfig{Delay: 2 * time.Microsecond, Bandwidth: 100e9})
	if err != nil {
		panic(err)
	}
	gpuID := tlp.NewID(3, 0, 0)
	// The GPU model answers memory reads.
	p.GPU.OnTLP = func(t tlp.View) {
		if t.Kind() != tlp.MRd {
			return
		}
		c := tlp.Packet{Kind: tlp.CplD, CompleterID: gpuID, RequesterID: t.RequesterID(), Tag: t.Tag(),
			ByteCount: 8, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}}
		b, _ := c.AppendTo(nil)
		_ = p.GPU.Send(b)
	}
	// The root complex receives the completion.
	var done time.Duration
	p.Host.OnTLP = func(t tlp.View) {
		done = s.Now()
		fmt.Printf("host got %v tag %d: % x\n", t.Kind(), t.Tag(), t.Payload())
	}
	rd := tlp.Packet{Kind: tlp.MRd, RequesterID: tlp.NewID(0, 0, 0), Tag: 5, FirstBE: 0xf, LastBE: 0xf, Address: 0x1000, Length: 2}
	b, _ := rd.AppendTo(nil)
	_ = p.Host.Send(b) // queued until the link is up
	s.Run(10 * time.Millisecond)
	fmt.Println("up:", p.Up(), "read answered:", done > 0)
	// Output:
	// host got CplD tag 5: 01 02 03 04 05 06 07 08
	// up: true read answered: true
}
