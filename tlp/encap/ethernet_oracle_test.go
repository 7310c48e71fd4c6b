package encap

import (
	"bytes"
	"net"
	"testing"

	"github.com/mdlayher/ethernet"
)

// TestBuildersAgreeWithMdlayherEthernet checks the Ethernet and 802.1Q
// framing of the builders against an independent implementation: frames
// built here are decoded by github.com/mdlayher/ethernet, and frames that it
// marshals are parsed here, field for field.
func TestBuildersAgreeWithMdlayherEthernet(t *testing.T) {
	mrd := []byte{0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0x05, 0x0f, 0xfe, 0xdc, 0x00, 0x10}
	for _, tagged := range []bool{false, true} {
		l2 := &L2{Dst: [6]byte{2, 0, 0, 0, 0, 2}, Src: [6]byte{2, 0, 0, 0, 0, 1}, Tagged: tagged, VLAN: 42, PCP: 5}
		f := &Fields{PairID: 0xabcdef, Seq: 9}
		frame, err := AppendDxpuEth(nil, l2, f, [][]byte{mrd})
		if err != nil {
			t.Fatal(err)
		}
		var ef ethernet.Frame
		if err := ef.UnmarshalBinary(frame); err != nil {
			t.Fatalf("tagged=%v: mdlayher/ethernet rejects our frame: %v", tagged, err)
		}
		if !bytes.Equal(ef.Destination, l2.Dst[:]) || !bytes.Equal(ef.Source, l2.Src[:]) {
			t.Errorf("tagged=%v: MACs %s>%s", tagged, ef.Source, ef.Destination)
		}
		if ef.EtherType != ethernet.EtherType(EtherType) {
			t.Errorf("tagged=%v: EtherType %#x", tagged, uint16(ef.EtherType))
		}
		if tagged {
			if ef.VLAN == nil || ef.VLAN.ID != 42 || ef.VLAN.Priority != 5 {
				t.Errorf("VLAN tag = %+v, want ID 42 priority 5", ef.VLAN)
			}
		} else if ef.VLAN != nil {
			t.Errorf("untagged frame decoded with VLAN %+v", ef.VLAN)
		}
		h := Header(ef.Payload)
		if h.PairID() != 0xabcdef || h.Seq() != 9 || h.Count() != 1 || h.TLPLen(0) != len(mrd) {
			t.Errorf("tagged=%v: dxpu header after mdlayher's L2: pair %#x seq %d n %d", tagged, h.PairID(), h.Seq(), h.Count())
		}

		// The other way: mdlayher marshals, we parse.
		out := ethernet.Frame{
			Destination: net.HardwareAddr(l2.Dst[:]), Source: net.HardwareAddr(l2.Src[:]),
			EtherType: ethernet.EtherType(EtherType), Payload: ef.Payload,
		}
		if tagged {
			out.VLAN = &ethernet.VLAN{Priority: 5, ID: 42}
		}
		raw, err := out.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		pf, err := ParseFrame(raw, nil)
		if err != nil {
			t.Fatalf("tagged=%v: ParseFrame of mdlayher's frame: %v", tagged, err)
		}
		if pf.Encap() != EncapDxpuEth || pf.NumTLPs() != 1 {
			t.Fatalf("tagged=%v: encap %v, %d TLPs", tagged, pf.Encap(), pf.NumTLPs())
		}
		if vid, ok := pf.VLAN(); ok != tagged || (tagged && vid != 42) {
			t.Errorf("tagged=%v: VLAN() = %d, %v", tagged, vid, ok)
		}
		got, trunc := pf.TLP(0)
		if trunc || !bytes.Equal(got, mrd) {
			t.Errorf("tagged=%v: TLP = %x (truncated %v), want %x", tagged, got, trunc, mrd)
		}
	}
}
