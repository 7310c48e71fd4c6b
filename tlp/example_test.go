package tlp_test

import (
	"encoding/hex"
	"fmt"

	"github.com/dxpu/dxpu/tlp"
)

// The worked example of the package documentation.
func ExampleParse() {
	b, _ := hex.DecodeString("000000010100050ffedc0010")
	v, err := tlp.Parse(b)
	if err != nil {
		panic(err)
	}
	fmt.Println(v.Kind(), v.RequesterID(), v.Tag(), v.Length(), v.RequestBytes())
	fmt.Printf("%#x\n", v.Address())
	// Output:
	// MRd 01:00.0 5 1 4
	// 0xfedc0010
}

func ExamplePacket_AppendTo() {
	p := tlp.Packet{Kind: tlp.MRd, TD: true, RequesterID: tlp.NewID(1, 0, 0), Tag: 5,
		Length: 1, FirstBE: 0xf, Address: 0xfedc0010}
	b, err := p.AppendTo(nil)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%x\n", b)
	_, err = tlp.Parse(b)
	fmt.Println(err)
	// Output:
	// 000080010100050ffedc0010ba2b1e6e
	// <nil>
}

func ExampleCplSplitter() {
	// 512 bytes from 0x1010, MPS 128, RCB 64.
	s, _ := tlp.NewCplSplitter(0x1010, 128, 0xf, 0xf, 128, 64)
	for c := range s.All() {
		fmt.Printf("len %2d DW, byte count %3d, lower address %#02x\n", c.Length, c.ByteCount, c.LowerAddress)
	}
	// Output:
	// len 28 DW, byte count 512, lower address 0x10
	// len 32 DW, byte count 400, lower address 0x00
	// len 32 DW, byte count 272, lower address 0x00
	// len 32 DW, byte count 144, lower address 0x00
	// len  4 DW, byte count  16, lower address 0x00
}
