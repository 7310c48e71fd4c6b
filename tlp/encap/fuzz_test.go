package encap_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

var sentinels = []error{
	encap.ErrShort, encap.ErrTruncated, encap.ErrVLAN, encap.ErrIPv4Header, encap.ErrIPv4Checksum,
	encap.ErrFragment, encap.ErrUDPLength, encap.ErrVersion, encap.ErrMsgType, encap.ErrBodyLength,
	encap.ErrTLPCount, encap.ErrTLPLength, encap.ErrNetTLP,
}

func fuzzSeeds(f *testing.F) {
	l2t := &encap.L2{Tagged: true, VLAN: 100, Dst: [6]byte{1, 2, 3, 4, 5, 6}}
	l3 := &encap.L3{Src: ipA, Dst: ipB}
	two := [][]byte{exampleMRd, bytes.Repeat([]byte{0x40, 0, 0, 1}, 4)}
	b, _ := encap.AppendDxpuEth(nil, exampleL2(), exampleFields(), [][]byte{exampleMRd})
	f.Add(b)
	b, _ = encap.AppendDxpuEth(nil, l2t, exampleFields(), two)
	f.Add(b)
	b, _ = encap.AppendDxpuUDP(nil, l2t, l3, exampleFields(), two)
	f.Add(b)
	b, _ = encap.AppendDxpuMsg(nil, exampleL2(), l3, &encap.Fields{Type: encap.MsgControl}, []byte{1, 2, 3})
	f.Add(b)
	b, _ = encap.AppendNetTLP(nil, l2t, l3, 1, 2, exampleMRd)
	f.Add(b)
	f.Add(b[:50])
	qinq := &encap.L2{Tagged: true, VLAN: 100, OuterTPID: encap.EtherTypeQinQ, OuterVLAN: 200, OuterPCP: 3}
	b, _ = encap.AppendDxpuEth(nil, qinq, exampleFields(), two)
	f.Add(b)
	f.Add([]byte{})
	// A few frames of each committed synthetic capture.
	paths, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "pcap", "*.pcap*"))
	for _, p := range paths {
		r, err := pcapio.Open(p)
		if err != nil {
			continue
		}
		for i := 0; i < 4; i++ {
			data, _, err := r.Next()
			if err != nil {
				break
			}
			f.Add(data)
		}
		r.Close()
	}
}

// FuzzParseFrame checks ParseFrame's invariants on any input: errors are
// *FrameErrors with a sentinel and an offset inside the frame; TLPs lie
// inside the frame; a frame that parses whole rebuilds to a frame that
// parses to the same header and TLPs; RejectTruncated only adds
// ErrTruncated.
func FuzzParseFrame(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := encap.ParseFrame(data, nil)
		strict, serr := encap.ParseFrame(data, &encap.Config{RejectTruncated: true})
		if err != nil {
			var fe *encap.FrameError
			if !errors.As(err, &fe) || fe.Offset < 0 || fe.Offset > len(data) || fe.Field == "" {
				t.Fatalf("error %v is not a FrameError with an offset in 0..%d", err, len(data))
			}
			known := false
			for _, s := range sentinels {
				known = known || errors.Is(err, s)
			}
			if !known {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			if serr == nil {
				t.Fatalf("lenient parse failed (%v) but strict passed", err)
			}
			return
		}
		if fr.Truncated() != (serr != nil) || serr != nil && !errors.Is(serr, encap.ErrTruncated) {
			t.Fatalf("truncated %v but strict parse %v", fr.Truncated(), serr)
		}
		_ = strict
		if fr.Encap() == encap.EncapNone && fr.NumTLPs() != 0 {
			t.Fatal("EncapNone with TLPs")
		}
		tlps := make([][]byte, fr.NumTLPs())
		total := 0
		for i := range tlps {
			b, tr := fr.TLP(i)
			if tr && !fr.Truncated() {
				t.Fatalf("TLP %d truncated in a whole frame", i)
			}
			if !tr && fr.Encap() != encap.EncapNetTLP && (len(b) < 12 || len(b)%4 != 0) {
				t.Fatalf("TLP %d of %d bytes accepted", i, len(b))
			}
			total += len(b)
			if total > len(data) {
				t.Fatalf("TLPs add up to %d bytes in a %d-byte frame", total, len(data))
			}
			tlps[i] = b
		}
		if fr.Truncated() || fr.Encap() == encap.EncapNone || !buildableTags(&fr) {
			return
		}
		_, innerTCI := fr.VLANTag(fr.NumVLANs() - 1)
		// Rebuild from what was parsed and compare.
		l2 := &encap.L2{}
		copy(l2.Dst[:], fr.DstMAC())
		copy(l2.Src[:], fr.SrcMAC())
		if fr.NumVLANs() > 0 {
			l2.Tagged, l2.VLAN, l2.PCP = true, innerTCI&encap.VLANVIDMask, uint8(innerTCI>>encap.VLANPCPShift)
		}
		if tpid, tci := fr.VLANTag(0); fr.NumVLANs() == 2 {
			l2.OuterTPID, l2.OuterVLAN, l2.OuterPCP = tpid, tci&encap.VLANVIDMask, uint8(tci>>encap.VLANPCPShift)
		}
		var l3 *encap.L3
		if fr.HasUDP() {
			l3 = &encap.L3{Src: fr.SrcIP(), Dst: fr.DstIP(), SrcPort: fr.SrcPort(), DstPort: fr.DstPort()}
		}
		var out []byte
		var berr error
		switch fr.Encap() {
		case encap.EncapNetTLP:
			out, berr = encap.AppendNetTLP(nil, l2, l3, fr.NetTLPSeq(), fr.NetTLPTimestamp(), tlps[0])
		case encap.EncapDxpuEth, encap.EncapDxpuUDP:
			fields := fr.Header().Fields()
			if fields.Type == encap.MsgTLP {
				out, berr = appendDxpu(l2, l3, &fields, tlps)
			} else {
				out, berr = encap.AppendDxpuMsg(nil, l2, l3, &fields, fr.Body())
			}
		}
		if berr != nil {
			t.Fatalf("rebuild: %v", berr)
		}
		re, err := encap.ParseFrame(out, nil)
		if err != nil {
			t.Fatalf("rebuilt frame does not parse: %v\n in %x\nout %x", err, data, out)
		}
		if l2end := encap.EthTypeOffset + encap.VLANTagLen*fr.NumVLANs(); !bytes.Equal(out[:l2end], data[:l2end]) {
			t.Fatalf("rebuilt addresses and tags differ:\n in %x\nout %x", data, out)
		}
		if re.Encap() != fr.Encap() || re.NumTLPs() != fr.NumTLPs() || !sameHeader(re.Header(), fr.Header()) ||
			re.NetTLPSeq() != fr.NetTLPSeq() || re.NetTLPTimestamp() != fr.NetTLPTimestamp() {
			t.Fatalf("rebuilt frame differs:\n in %x\nout %x", data, out)
		}
		for i := range tlps {
			if b, _ := re.TLP(i); !bytes.Equal(b, tlps[i]) {
				t.Fatalf("rebuilt TLP %d differs", i)
			}
		}
	})
}

// buildableTags reports whether the builders can write fr's tags: the
// innermost 802.1Q, none with DEI set.
func buildableTags(fr *encap.Frame) bool {
	for i := 0; i < fr.NumVLANs(); i++ {
		tpid, tci := fr.VLANTag(i)
		if tci&encap.VLANDEIBit != 0 || i == fr.NumVLANs()-1 && tpid != encap.EtherTypeVLAN {
			return false
		}
	}
	return true
}

func appendDxpu(l2 *encap.L2, l3 *encap.L3, f *encap.Fields, tlps [][]byte) ([]byte, error) {
	if l3 == nil {
		return encap.AppendDxpuEth(nil, l2, f, tlps)
	}
	return encap.AppendDxpuUDP(nil, l2, l3, f, tlps)
}

// sameHeader compares dxpu headers and bodies, ignoring the reserved byte
// (readers ignore it, builders write 0).
func sameHeader(a, b encap.Header) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Fields() == b.Fields() && bytes.Equal(a[encap.HeaderLen:], b[encap.HeaderLen:])
}
