package pcie

import (
	"encoding/binary"

	"github.com/dxpu/dxpu/tlp"
)

// The builders below append one TLP to dst and return the extended slice;
// with a dst of enough capacity they allocate nothing. They build the
// handful of TLPs the emulator exchanges; the general codec is package tlp.

// byteEnables returns the First and Last DW BE and the Length in DW for n
// bytes at addr (n >= 1, not crossing 4 KiB). A zero-length read is Length
// 1 with First BE 0.
func byteEnables(addr uint64, n int) (first, last uint8, dws int) {
	if n == 0 {
		return 0, 0, 1
	}
	start := int(addr & 3)
	end := start + n // exclusive, relative to the first DW
	dws = (end + 3) / 4
	first = uint8(0xf<<start) & 0xf
	if dws == 1 {
		first &= uint8(1<<end - 1)
		return first, 0, 1
	}
	lastBytes := end - 4*(dws-1)
	last = uint8(0xf >> (4 - lastBytes))
	return first, last, dws
}

func putDW0(h []byte, fmtType byte, tag uint16, attr uint8, length int) {
	h[0] = fmtType
	h[1] = byte(tag>>9&1)<<7 | byte(tag>>8&1)<<3 | (attr>>2&1)<<2
	h[2] = (attr&3)<<4 | byte(length>>8&3)
	h[3] = byte(length)
}

func lengthField(dws int) int { return dws & 0x3ff } // 1024 encodes as 0

func appendAddr(dst []byte, addr uint64) []byte {
	if addr >= 1<<32 {
		dst = binary.BigEndian.AppendUint32(dst, uint32(addr>>32))
	}
	return binary.BigEndian.AppendUint32(dst, uint32(addr)&^3)
}

// AppendMRd appends a memory read of n bytes at addr (n <= 4096, not
// crossing 4 KiB).
func AppendMRd(dst []byte, req tlp.ID, tag uint16, addr uint64, n int) []byte {
	first, last, dws := byteEnables(addr, n)
	ft := byte(0x00)
	if addr >= 1<<32 {
		ft = 0x20
	}
	i := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	putDW0(dst[i:], ft, tag, 0, lengthField(dws))
	dst = binary.BigEndian.AppendUint16(dst, uint16(req))
	dst = append(dst, byte(tag), last<<4|first)
	return appendAddr(dst, addr)
}

// AppendMWr appends a memory write of data at addr (not crossing 4 KiB).
// Bytes outside data in the first and last DW are masked by the BEs.
func AppendMWr(dst []byte, req tlp.ID, addr uint64, data []byte) []byte {
	first, last, dws := byteEnables(addr, len(data))
	ft := byte(0x40)
	if addr >= 1<<32 {
		ft = 0x60
	}
	i := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	putDW0(dst[i:], ft, 0, 0, lengthField(dws))
	dst = binary.BigEndian.AppendUint16(dst, uint16(req))
	dst = append(dst, 0, last<<4|first)
	dst = appendAddr(dst, addr)
	return appendPayload(dst, int(addr&3), data, dws)
}

func appendPayload(dst []byte, lead int, data []byte, dws int) []byte {
	i := len(dst)
	dst = append(dst, make([]byte, 4*dws)...)
	copy(dst[i+lead:], data)
	return dst
}

// AppendCpl appends a completion without data (config write, or an error
// status).
func AppendCpl(dst []byte, completer, requester tlp.ID, tag uint16, st tlp.Status, byteCount int) []byte {
	i := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	putDW0(dst[i:], 0x0A, tag, 0, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(completer))
	dst = append(dst, byte(st)<<5|byte(byteCount>>8&0xf), byte(byteCount))
	dst = binary.BigEndian.AppendUint16(dst, uint16(requester))
	return append(dst, byte(tag), 0)
}

// AppendCplD appends a successful completion with data. lowerAddr is the
// byte address of data[0] (its low 7 bits are sent); byteCount the bytes
// still to return for the request, these included.
func AppendCplD(dst []byte, completer, requester tlp.ID, tag uint16, byteCount int, lowerAddr uint64, data []byte) []byte {
	lead := int(lowerAddr & 3)
	dws := (lead + len(data) + 3) / 4
	i := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	putDW0(dst[i:], 0x4A, tag, 0, lengthField(dws))
	dst = binary.BigEndian.AppendUint16(dst, uint16(completer))
	dst = append(dst, byte(byteCount>>8&0xf), byte(byteCount))
	dst = binary.BigEndian.AppendUint16(dst, uint16(requester))
	dst = append(dst, byte(tag), byte(lowerAddr&0x7f))
	return appendPayload(dst, lead, data, dws)
}

// AppendCfg appends a configuration read (data nil) or write of one DW.
// type1 selects CfgRd1/CfgWr1; reg is the byte offset (DW aligned).
func AppendCfg(dst []byte, type1 bool, req tlp.ID, tag uint16, target tlp.ID, reg uint16, be uint8, data []byte) []byte {
	ft := byte(0x04)
	if type1 {
		ft = 0x05
	}
	if data != nil {
		ft |= 0x40
	}
	i := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	putDW0(dst[i:], ft, tag, 0, 1)
	dst = binary.BigEndian.AppendUint16(dst, uint16(req))
	dst = append(dst, byte(tag), be&0xf)
	dst = binary.BigEndian.AppendUint16(dst, uint16(target))
	dst = append(dst, byte(reg>>8&0xf), byte(reg&0xfc))
	if data != nil {
		var dw [4]byte
		copy(dw[:], data)
		dst = append(dst, dw[:]...)
	}
	return dst
}

// RequestBytes returns the bytes a memory read or write request covers,
// from Length and the byte enables, and the address of its first enabled
// byte.
func RequestBytes(v tlp.View) (addr uint64, n int) {
	dws := v.Length()
	first, last := v.FirstBE(), v.LastBE()
	addr = v.Address()
	if dws == 1 {
		if first == 0 {
			return addr, 0
		}
		lo, hi := beSpan(first)
		return addr + uint64(lo), hi - lo
	}
	lo, _ := beSpan(first)
	_, hi := beSpan(last)
	return addr + uint64(lo), 4*(dws-1) + hi - lo
}

// beSpan returns the first enabled byte and one past the last.
func beSpan(be uint8) (lo, hi int) {
	lo, hi = 4, 0
	for i := 0; i < 4; i++ {
		if be&(1<<i) != 0 {
			if i < lo {
				lo = i
			}
			hi = i + 1
		}
	}
	if hi == 0 {
		return 0, 0
	}
	return lo, hi
}

// SplitRead calls fn for each request of at most mrrs bytes, never crossing
// a 4 KiB boundary, that a read of n bytes at addr becomes.
func SplitRead(addr uint64, n uint64, mrrs int, fn func(addr uint64, n int)) {
	for n > 0 {
		k := uint64(mrrs)
		if b := 4096 - addr%4096; b < k {
			k = b
		}
		if k > n {
			k = n
		}
		fn(addr, int(k))
		addr += k
		n -= k
	}
}

// SplitCompletion calls fn for each completion a completer returns for a
// read of n bytes at addr: none larger than mps, the first ending on an rcb
// boundary (or at the end), the others whole rcb multiples.
func SplitCompletion(addr uint64, n int, mps, rcb int, fn func(addr uint64, n int)) {
	if n == 0 {
		fn(addr, 0)
		return
	}
	for n > 0 {
		k := n
		if k > mps {
			// End on an RCB boundary not beyond mps bytes.
			end := (addr + uint64(mps)) / uint64(rcb) * uint64(rcb)
			if end <= addr {
				end = addr + uint64(rcb) - addr%uint64(rcb)
			}
			k = int(end - addr)
		}
		fn(addr, k)
		addr += uint64(k)
		n -= k
	}
}

// Valid reports whether v holds at least the header its first byte
// declares and names a TLP kind: the check every component makes before
// reading header fields.
func Valid(v tlp.View) bool {
	return len(v) >= tlp.Header3DW && len(v) >= v.HeaderLen() && v.Kind() != tlp.KindInvalid
}
