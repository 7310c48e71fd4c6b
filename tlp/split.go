package tlp

import (
	"fmt"
	"iter"
)

// validSize reports whether n is a power of two in [lo, hi].
func validSize(n, lo, hi int) bool { return n >= lo && n <= hi && n&(n-1) == 0 }

// MaxSize returns the byte size of a Max Payload Size or Max Read Request
// Size encoding v (0..5): 128 << v.
func MaxSize(v uint8) int { return 128 << (v & 7) }

// CplPart describes one completion of a split read: what its header
// fields say and which bytes of the request it returns.
type CplPart struct {
	Offset       int    // offset of its first valid byte from the request's first byte
	Bytes        int    // valid bytes it returns
	Length       int    // payload DWs (the Length field)
	ByteCount    int    // Byte Count field: bytes still owed, this completion included (1..4096)
	LowerAddress uint8  // Lower Address field: low 7 bits of its first byte's address
	Address      uint64 // byte address of its first valid byte
}

// Last reports whether c completes the request.
func (c CplPart) Last() bool { return c.Bytes == c.ByteCount }

// CplSplitter yields the completions of one memory read, in increasing
// address order. The zero value yields nothing. It allocates nothing.
//
// Each completion is as large as the rules allow: none carries more than
// MPS bytes of payload; the first ends at the end of the request or on a
// Read CplPart Boundary; the middle ones start and end on RCB
// boundaries (they carry whole RCB multiples); the last ends with the
// request.
type CplSplitter struct {
	cur, end uint64 // next and one-past-last byte address
	mps, rcb uint64
	zero     bool // zero-length read: one 1-DW completion, Byte Count 1
	done     bool
}

// NewCplSplitter prepares the completions for a read of length DWs at the
// DW-aligned address addr with the given byte enables. mps is the Max
// Payload Size in bytes (128..4096), rcb the Read CplPart Boundary in
// bytes (64 or 128 in PCIe, any power of two up to mps accepted).
func NewCplSplitter(addr uint64, length int, firstBE, lastBE uint8, mps, rcb int) (CplSplitter, error) {
	if !validSize(mps, 128, 4096) {
		return CplSplitter{}, fmt.Errorf("tlp: MPS %d: want a power of two in 128..4096: %w", mps, ErrField)
	}
	if !validSize(rcb, 4, mps) {
		return CplSplitter{}, fmt.Errorf("tlp: RCB %d: want a power of two in 4..MPS (64 or 128): %w", rcb, ErrField)
	}
	if length < 1 || length > 1024 {
		return CplSplitter{}, fmt.Errorf("tlp: read Length %d: want 1..1024 DW: %w", length, ErrField)
	}
	first := FirstByteAddress(addr, firstBE)
	s := CplSplitter{cur: first, mps: uint64(mps), rcb: uint64(rcb)}
	s.zero = length == 1 && firstBE&0xf == 0
	s.end = first + uint64(ByteCount(length, firstBE, lastBE))
	return s, nil
}

// SplitterFor returns the splitter for the memory read request v.
func SplitterFor(v View, mps, rcb int) (CplSplitter, error) {
	if k := v.Kind(); k != MRd && k != MRdLk {
		return CplSplitter{}, fmt.Errorf("tlp: %s is not a memory read: %w", k, ErrField)
	}
	if v.TH() {
		return NewCplSplitter(v.Address(), v.Length(), 0xf, 0xf, mps, rcb)
	}
	return NewCplSplitter(v.Address(), v.Length(), v.FirstBE(), v.LastBE(), mps, rcb)
}

// Next returns the next completion, or false when the read is complete.
func (s *CplSplitter) Next() (CplPart, bool) {
	if s.done || s.cur >= s.end || s.mps == 0 {
		return CplPart{}, false
	}
	total := s.end - s.cur
	if s.zero {
		s.done = true
		return CplPart{Bytes: 1, Length: 1, ByteCount: 1, LowerAddress: uint8(s.cur & 0x7f), Address: s.cur}, true
	}
	start := s.cur &^ 3
	stop := start + s.mps // the payload may not exceed MPS
	if stop >= s.end {
		stop = s.end
	} else {
		stop &^= s.rcb - 1 // and must end on an RCB boundary
	}
	c := CplPart{
		Bytes:        int(stop - s.cur),
		Length:       int((stop + 3 - start) / 4),
		ByteCount:    int(total),
		LowerAddress: uint8(s.cur & 0x7f),
		Address:      s.cur,
	}
	s.cur = stop
	return c, true
}

// All iterates over the remaining completions, each with its offset from
// the first byte of the request set.
func (s CplSplitter) All() iter.Seq[CplPart] {
	return func(yield func(CplPart) bool) {
		base := s.cur
		for {
			c, ok := s.Next()
			if !ok {
				return
			}
			c.Offset = int(c.Address - base)
			if !yield(c) {
				return
			}
		}
	}
}

// AppendCompletions appends every completion of the read to dst.
func AppendCompletions(dst []CplPart, addr uint64, length int, firstBE, lastBE uint8, mps, rcb int) ([]CplPart, error) {
	s, err := NewCplSplitter(addr, length, firstBE, lastBE, mps, rcb)
	if err != nil {
		return dst, err
	}
	for c := range s.All() {
		dst = append(dst, c)
	}
	return dst, nil
}

// Request is one request of a transfer split by SplitRequests.
type Request struct {
	Address uint64 // DW-aligned address (the header's Address)
	Length  int    // DWs
	FirstBE uint8
	LastBE  uint8
	Offset  int // offset of its first byte in the transfer
	Bytes   int // bytes it moves
}

// ReqSplitter yields the requests that move size bytes from byte address
// addr, none larger than max bytes (MRRS for reads, MPS for writes) and
// none crossing a 4 KiB boundary. Requests after the first start on a
// multiple of max, as DMA engines do, so later ones are aligned. A
// transfer of 0 bytes is one zero-length request (Length 1, BEs 0). It
// allocates nothing.
type ReqSplitter struct {
	addr, cur, end uint64
	max            uint64
	zero, done     bool
}

// NewReqSplitter checks max (a power of two in 128..4096) and the range.
func NewReqSplitter(addr uint64, size int, max int) (ReqSplitter, error) {
	if !validSize(max, 128, 4096) {
		return ReqSplitter{}, fmt.Errorf("tlp: max request size %d: want a power of two in 128..4096: %w", max, ErrField)
	}
	if size < 0 || uint64(size) > ^uint64(0)-addr {
		return ReqSplitter{}, fmt.Errorf("tlp: transfer of %d bytes at %#x: out of range: %w", size, addr, ErrField)
	}
	return ReqSplitter{addr: addr, cur: addr, end: addr + uint64(size), max: uint64(max), zero: size == 0}, nil
}

// Next returns the next request, or false when the transfer is covered.
func (s *ReqSplitter) Next() (Request, bool) {
	if s.done || s.max == 0 {
		return Request{}, false
	}
	if s.zero {
		s.done = true
		return Request{Address: s.cur &^ 3, Length: 1}, true
	}
	if s.cur >= s.end {
		return Request{}, false
	}
	stop := (s.cur/s.max + 1) * s.max // max <= 4096 divides 4096: never crosses 4 KiB
	if stop > s.end || stop < s.cur {
		stop = s.end
	}
	start := s.cur &^ 3
	r := Request{
		Address: start,
		Length:  int((stop + 3 - start) / 4),
		FirstBE: (0xf << (s.cur & 3)) & 0xf,
		LastBE:  0xf >> (3 - (stop-1)&3),
		Offset:  int(s.cur - s.addr),
		Bytes:   int(stop - s.cur),
	}
	if r.Length == 1 {
		r.FirstBE &= r.LastBE
		r.LastBE = 0
	}
	s.cur = stop
	return r, true
}

// All iterates over the remaining requests.
func (s ReqSplitter) All() iter.Seq[Request] {
	return func(yield func(Request) bool) {
		for {
			r, ok := s.Next()
			if !ok || !yield(r) {
				return
			}
		}
	}
}
