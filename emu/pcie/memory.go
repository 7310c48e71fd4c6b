package pcie

import "bytes"

// Memory is a sparse, byte-addressed memory (host DRAM or GPU VRAM). Pages
// are allocated on the first non-zero write, so a 150 MB copy of zeros costs
// nothing; unwritten bytes read as zero.
type Memory struct {
	pages map[uint64]*[pageSize]byte
}

const pageSize = 64 << 10

// NewMemory returns an empty memory.
func NewMemory() *Memory { return &Memory{pages: make(map[uint64]*[pageSize]byte)} }

// Read fills dst from addr.
func (m *Memory) Read(addr uint64, dst []byte) {
	for len(dst) > 0 {
		off := addr % pageSize
		n := min(uint64(len(dst)), pageSize-off)
		if p := m.pages[addr/pageSize]; p != nil {
			copy(dst[:n], p[off:off+n])
		} else {
			clear(dst[:n])
		}
		dst = dst[n:]
		addr += n
	}
}

// Write stores src at addr.
func (m *Memory) Write(addr uint64, src []byte) {
	for len(src) > 0 {
		off := addr % pageSize
		n := min(uint64(len(src)), pageSize-off)
		p := m.pages[addr/pageSize]
		if p == nil && !allZero(src[:n]) {
			p = new([pageSize]byte)
			m.pages[addr/pageSize] = p
		}
		if p != nil {
			copy(p[off:off+n], src[:n])
		}
		src = src[n:]
		addr += n
	}
}

// Copy copies n bytes from src in m to dst in to (used by the functional
// fast path of long DMA streams and by device-local copies). It works page
// by page and skips ranges that are zero on both sides, so copying untouched
// memory costs nothing.
func (m *Memory) Copy(to *Memory, dst, src, n uint64) {
	for n > 0 {
		k := min(n, pageSize-src%pageSize, pageSize-dst%pageSize)
		sp := m.pages[src/pageSize]
		dp := to.pages[dst/pageSize]
		switch {
		case sp == nil && dp == nil:
		case sp == nil:
			clear(dp[dst%pageSize : dst%pageSize+k])
		default:
			to.Write(dst, sp[src%pageSize:src%pageSize+k])
		}
		src += k
		dst += k
		n -= k
	}
}

// Fill sets n bytes at addr to v.
func (m *Memory) Fill(addr uint64, v byte, n uint64) {
	var buf [pageSize]byte
	if v != 0 {
		for i := range buf {
			buf[i] = v
		}
	}
	for n > 0 {
		k := min(n, pageSize-addr%pageSize)
		p := m.pages[addr/pageSize]
		switch {
		case v == 0 && p == nil:
		case v == 0:
			clear(p[addr%pageSize : addr%pageSize+k])
		default:
			m.Write(addr, buf[:k])
		}
		addr += k
		n -= k
	}
}

// Uint64 reads a little-endian 64-bit value.
func (m *Memory) Uint64(addr uint64) uint64 {
	var b [8]byte
	m.Read(addr, b[:])
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// PutUint64 writes a little-endian 64-bit value.
func (m *Memory) PutUint64(addr, v uint64) {
	var b [8]byte
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
	m.Write(addr, b[:])
}

// Pages returns the number of allocated pages.
func (m *Memory) Pages() int { return len(m.pages) }

// zeroPage is what an unwritten page holds: Write compares against it
// (memequal compares words, not bytes) to decide whether a page is needed.
var zeroPage [pageSize]byte

// allZero reports whether b (at most a page) holds only zeros.
func allZero(b []byte) bool { return bytes.Equal(b, zeroPage[:len(b)]) }
