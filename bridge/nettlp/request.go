package nettlp

import (
	"fmt"
	"math/bits"

	"github.com/dxpu/dxpu/tlp"
)

// request is one memory request decoded leniently, the way a NetTLP adapter
// takes it: a Length field of 0 is 1024 DW whatever the AT bits say (libtlp
// writes 1024 into the 10-bit field and spills into AT), requests may cross
// 4 KiB (libtlp's dma_read_aligned does not cut there), a 4DW header below
// 4 GiB is served, and short single-DW libtlp writes are accepted.
type request struct {
	v        tlp.View
	kind     tlp.Kind
	dwAddr   uint64 // DW-aligned address from the header
	lengthDW int    // 1..1024
	firstBE  uint8
	lastBE   uint8
	addr     uint64 // address of the first enabled byte
	count    int    // PCIe byte count: first to last enabled byte; 1 for a zero-length read
	payload  []byte // MWr: the bytes after the header, digest included if any
}

// decodeRequest reads the header fields of any TLP whose header is present.
// For memory requests (MRd, MRdLk, MWr) it computes the byte range; the
// error wraps ErrMalformedRequest and names the field.
func decodeRequest(b []byte) (request, error) {
	var r request
	if len(b) < 4 {
		return r, fmt.Errorf("%w: %d bytes, a TLP header needs at least 12", ErrMalformedRequest, len(b))
	}
	v := tlp.View(b)
	r.v = v
	r.kind = v.Kind()
	if r.kind == tlp.KindInvalid {
		return r, fmt.Errorf("%w: byte 0 = %#02x: reserved Fmt/Type", ErrMalformedRequest, b[0])
	}
	if len(b) < v.HeaderLen() {
		return r, fmt.Errorf("%w: %s header needs %d bytes, datagram holds %d", ErrMalformedRequest, r.kind, v.HeaderLen(), len(b))
	}
	if !r.kind.IsMemory() || r.kind.IsAtomic() {
		return r, nil
	}
	r.dwAddr = v.Address()
	r.lengthDW = int(v.LengthField())
	if r.lengthDW == 0 {
		r.lengthDW = 1024
	}
	r.firstBE, r.lastBE = v.FirstBE(), v.LastBE()
	if v.TH() && r.kind != tlp.MWr {
		// A read with TH carries a steering tag in the BE fields and
		// reads whole DWs.
		r.firstBE, r.lastBE = 0xf, 0xf
		if r.lengthDW == 1 {
			r.lastBE = 0
		}
	}
	if r.lengthDW > 1 && (r.firstBE == 0 || r.lastBE == 0) {
		r.addr, r.count = r.dwAddr, 4*r.lengthDW
		return r, fmt.Errorf("%w: %s of %d DW with First BE %#x, Last BE %#x: both must be nonzero", ErrMalformedRequest, r.kind, r.lengthDW, r.firstBE, r.lastBE)
	}
	// Length 1 wants Last BE 0; a nonzero one is ignored there.
	r.addr = tlp.FirstByteAddress(r.dwAddr, r.firstBE)
	r.count = tlp.ByteCount(r.lengthDW, r.firstBE, r.lastBE)
	if r.dwAddr+uint64(4*r.lengthDW) < r.dwAddr {
		r.addr, r.count = r.dwAddr, 4*r.lengthDW
		return r, fmt.Errorf("%w: %s at %#x of %d DW wraps the address space", ErrMalformedRequest, r.kind, r.dwAddr, r.lengthDW)
	}
	if r.kind == tlp.MWr {
		r.payload = b[v.HeaderLen():]
	}
	return r, nil
}

// writeData returns the write's data DWs as they sit in memory order from
// dwAddr: normally the first 4*Length payload bytes (bytes beyond them, a
// digest or a sender's excess, are ignored). libtlp's dma_write sends a
// single-DW write that ends before the DW's last byte with three payload
// bytes, its data right-aligned in them (front padding counted over the
// BE's clear bits 0..2); that shape is recognised and the enabled bytes are
// moved to their BE positions in fix, which then is returned.
func (r *request) writeData(fix *[4]byte) ([]byte, error) {
	want := 4 * r.lengthDW
	if len(r.payload) >= want {
		return r.payload[:want], nil
	}
	if r.lengthDW == 1 && len(r.payload) > 0 && r.firstBE != 0 {
		n := bits.OnesCount8(r.firstBE)
		lo := bits.TrailingZeros8(r.firstBE)
		contiguous := r.firstBE>>lo == 1<<n-1
		if contiguous && n <= len(r.payload) {
			*fix = [4]byte{}
			copy(fix[lo:lo+n], r.payload[len(r.payload)-n:])
			return fix[:], nil
		}
	}
	return nil, fmt.Errorf("%w: MWr of %d DW at %#x carries %d payload bytes, needs %d", ErrMalformedRequest, r.lengthDW, r.dwAddr, len(r.payload), want)
}
