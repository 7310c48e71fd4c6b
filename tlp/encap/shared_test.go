package encap_test

import (
	"errors"
	"io"
	"testing"

	"github.com/dxpu/dxpu/internal/shareddata"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// TestSharedCaptures parses every frame of every NetTLP capture: all are
// NetTLP with one TLP, those cut by the 128-byte snap length are flagged
// truncated exactly when the UDP length says more than the frame holds, and
// padding of short frames is not taken as TLP bytes.
func TestSharedCaptures(t *testing.T) {
	var frames, truncated, padded, vlan, cutOnWire int
	for _, path := range shareddata.NetTLPCaptures(t) {
		r, err := pcapio.Open(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if r.Snaplen() != 128 {
			t.Errorf("%s: snaplen %d, SOURCE.md says 128", path, r.Snaplen())
		}
		for i := 1; ; i++ {
			data, ci, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s frame %d: %v", path, i, err)
			}
			f, err := encap.ParseFrame(data, nil)
			if err != nil {
				t.Errorf("%s frame %d: %v", path, i, err)
				continue
			}
			frames++
			if f.Encap() != encap.EncapNetTLP || f.NumTLPs() != 1 {
				t.Errorf("%s frame %d: encap %v with %d TLPs, want nettlp with 1", path, i, f.Encap(), f.NumTLPs())
				continue
			}
			if f.SrcPort() != f.DstPort() || f.DstPort() < 0x3000 || f.DstPort() > 0x30ff {
				t.Errorf("%s frame %d: ports %#x -> %#x", path, i, f.SrcPort(), f.DstPort())
			}
			b, trunc := f.TLP(0)
			udpLen := int(data[f.HeaderOffset()-4])<<8 | int(data[f.HeaderOffset()-3])
			declared := udpLen - 8 - 6
			wantTrunc := f.HeaderOffset()+6+declared > len(data)
			if trunc != wantTrunc || trunc != f.Truncated() {
				t.Errorf("%s frame %d: truncated %v, want %v (caplen %d of %d)", path, i, trunc, wantTrunc, ci.CaptureLength, ci.Length)
			}
			if trunc && ci.Length == ci.CaptureLength {
				// The capture hardware recorded a frame shorter than its
				// IP length without marking it cut: still truncated.
				cutOnWire++
			}
			if !trunc && len(b) != declared {
				t.Errorf("%s frame %d: TLP of %d bytes, UDP declares %d", path, i, len(b), declared)
			}
			if trunc {
				truncated++
			}
			if f.HeaderOffset()+6+declared < len(data) {
				padded++
			}
			if f.NumVLANs() > 0 {
				vlan++
			}
			if len(b) < 12 {
				t.Errorf("%s frame %d: TLP of %d bytes is shorter than a header", path, i, len(b))
			}
		}
		r.Close()
	}
	t.Logf("%d frames: %d truncated (%d of them with original length = captured length), %d padded, %d VLAN-tagged", frames, truncated, cutOnWire, padded, vlan)
	if frames == 0 || truncated == 0 || padded == 0 || vlan == 0 {
		t.Errorf("corpus lacks a case: %d frames, %d truncated, %d padded, %d tagged", frames, truncated, padded, vlan)
	}
}
