package encap_test

import (
	"fmt"
	"testing"

	"github.com/dxpu/dxpu/tlp/encap"
)

// TestFrameOverhead: FrameOverhead is what a built frame holds besides its
// TLPs and their 2-byte lengths, for each combination of tag and UDP; and
// L2.HeaderLen counts both tags of a QinQ frame.
func TestFrameOverhead(t *testing.T) {
	t.Parallel()
	tlps := [][]byte{make([]byte, 64), make([]byte, 128)} // long enough that nothing is padded
	for _, tagged := range []bool{false, true} {
		for _, udp := range []bool{false, true} {
			l2 := &encap.L2{Tagged: tagged, VLAN: 9}
			var frame []byte
			var err error
			if udp {
				frame, err = encap.AppendDxpuUDP(nil, l2, &encap.L3{Src: ipA, Dst: ipB}, exampleFields(), tlps)
			} else {
				frame, err = encap.AppendDxpuEth(nil, l2, exampleFields(), tlps)
			}
			if err != nil {
				t.Fatal(err)
			}
			want := len(frame) - 64 - 128 - 2*len(tlps)
			if got := encap.FrameOverhead(tagged, udp); got != want {
				t.Errorf("FrameOverhead(tagged %v, udp %v) = %d, the built frame has %d", tagged, udp, got, want)
			}
		}
	}
	for _, c := range []struct {
		l2   encap.L2
		want int
	}{
		{encap.L2{}, 14},
		{encap.L2{Tagged: true}, 18},
		{encap.L2{Tagged: true, OuterTPID: encap.EtherTypeQinQ}, 22},
	} {
		frame, err := encap.AppendDxpuEth(nil, &c.l2, exampleFields(), tlps)
		if err != nil {
			t.Fatal(err)
		}
		f, err := encap.ParseFrame(frame, nil)
		if got := c.l2.HeaderLen(); got != c.want || err != nil || f.HeaderOffset() != c.want {
			t.Errorf("%s: HeaderLen %d, dxpu header at %d (%v), want %d", fmt.Sprintf("%+v", c.l2), got, f.HeaderOffset(), err, c.want)
		}
	}
}
