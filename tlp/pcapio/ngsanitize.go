package pcapio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// maxBlock bounds one pcapng block: a MaxSnaplen record plus generous room
// for options.
const maxBlock = MaxSnaplen + 64<<10

// pcapng block types and the option codes whose values pcapgo indexes
// without checking their length.
const (
	ngIDB = 1
	ngPB  = 2
	ngSPB = 3
	ngISB = 5
	ngEPB = 6
	ngSHB = 0x0a0d0d0a
	ngBOM = 0x1a2b3c4d

	optIfFilter   = 11
	optIfTsresol  = 9
	optIfTsoffset = 14
)

// ngSanitizer sits between the file and pcapgo.NgReader. It reads one
// whole block at a time, checks it, and only then passes its bytes on, so
// that pcapgo never allocates from an unchecked length and never indexes an
// option shorter than it expects.
type ngSanitizer struct {
	r      io.Reader
	buf    []byte // current block
	pos    int    // bytes of buf already handed out
	off    int64  // file offset of the next block
	order  binary.ByteOrder
	snaps  []uint32 // snap length per interface of the current section
	blocks int
	err    error
	hdr    [12]byte // scratch: a local array would escape through s.r

	firstSnap uint32 // snap length of the file's first interface, as declared
	sawIDB    bool
}

func (s *ngSanitizer) Read(p []byte) (int, error) {
	if s.pos == len(s.buf) {
		if s.err != nil {
			return 0, s.err
		}
		if err := s.nextBlock(); err != nil {
			s.err = err
			return 0, err
		}
	}
	n := copy(p, s.buf[s.pos:])
	s.pos += n
	return n, nil
}

func (s *ngSanitizer) corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: pcapng block %d at offset %d: %s", ErrCorrupt, s.blocks+1, s.off, fmt.Sprintf(format, args...))
}

func (s *ngSanitizer) nextBlock() error {
	hdr := s.hdr[:]
	if n, err := io.ReadFull(s.r, hdr[:8]); err != nil {
		if n == 0 && errors.Is(err, io.EOF) {
			return io.EOF
		}
		return fmt.Errorf("%w (pcapng block %d at offset %d: header cut after %d bytes)", io.ErrUnexpectedEOF, s.blocks+1, s.off, n)
	}
	typ := binary.LittleEndian.Uint32(hdr[:4]) // the SHB type reads the same both ways
	hl := 8
	if typ == ngSHB {
		if _, err := io.ReadFull(s.r, hdr[8:12]); err != nil {
			return fmt.Errorf("%w (pcapng section header at offset %d: byte-order magic cut)", io.ErrUnexpectedEOF, s.off)
		}
		switch {
		case binary.BigEndian.Uint32(hdr[8:]) == ngBOM:
			s.order = binary.BigEndian
		case binary.LittleEndian.Uint32(hdr[8:]) == ngBOM:
			s.order = binary.LittleEndian
		default:
			return s.corrupt("section header byte-order magic %x, want 1a2b3c4d", hdr[8:12])
		}
		s.snaps = s.snaps[:0]
		hl = 12
	} else if s.order == nil {
		return s.corrupt("first block has type %#x, want a section header (0x0a0d0d0a)", typ)
	} else {
		typ = s.order.Uint32(hdr[:4])
	}
	length := s.order.Uint32(hdr[4:8])
	minLen := minBlockLen(typ)
	if length < minLen || length%4 != 0 || length > maxBlock {
		return s.corrupt("block type %#x total length %d: want a multiple of 4 in %d..%d", typ, length, minLen, maxBlock)
	}
	if cap(s.buf) < int(length) {
		s.buf = make([]byte, length)
	}
	b := s.buf[:length]
	copy(b, hdr[:hl])
	if n, err := io.ReadFull(s.r, b[hl:]); err != nil {
		return fmt.Errorf("%w (pcapng block %d at offset %d: %d of %d bytes)", io.ErrUnexpectedEOF, s.blocks+1, s.off, hl+n, length)
	}
	if trailer := s.order.Uint32(b[length-4:]); trailer != length {
		return s.corrupt("trailing total length %d differs from leading %d", trailer, length)
	}
	body := b[8 : length-4]
	var optStart int
	switch typ {
	case ngSHB:
		optStart = 16
	case ngIDB:
		optStart = 8
		snap := s.order.Uint32(body[4:8])
		s.snaps = append(s.snaps, snap)
		if !s.sawIDB {
			s.firstSnap, s.sawIDB = snap, true
		}
		if snap > MaxSnaplen {
			// pcapgo allocates a record buffer of the snap length: cap it.
			s.order.PutUint32(body[4:8], MaxSnaplen)
		}
		if len(s.snaps) > 1<<16 {
			return s.corrupt("more than 65536 interfaces in one section")
		}
	case ngISB:
		optStart = 12
	case ngEPB, ngPB:
		capLen := s.order.Uint32(body[12:16])
		if capLen > uint32(len(body)-20) {
			return s.corrupt("captured length %d exceeds the block's %d data bytes", capLen, len(body)-20)
		}
		optStart = 20 + int(capLen+3)&^3
	case ngSPB:
		capLen := s.order.Uint32(body[0:4])
		if len(s.snaps) > 0 && s.snaps[0] != 0 && capLen > s.snaps[0] {
			capLen = s.snaps[0]
		}
		if capLen > uint32(len(body)-4) {
			return s.corrupt("simple packet of %d bytes exceeds the block's %d data bytes", capLen, len(body)-4)
		}
		optStart = -1 // no options
	default:
		optStart = -1 // pcapgo skips unknown blocks whole
	}
	if optStart >= 0 {
		if err := s.checkOptions(typ, body, optStart); err != nil {
			return err
		}
	}
	s.buf, s.pos = b, 0
	s.off += int64(length)
	s.blocks++
	return nil
}

// checkOptions walks the options of a block so that none runs past the
// block and the ones pcapgo reads by fixed index are long enough.
func (s *ngSanitizer) checkOptions(typ uint32, body []byte, at int) error {
	for at < len(body) {
		if len(body)-at < 4 {
			return s.corrupt("option header at block byte %d cut by the block end", 8+at)
		}
		code := s.order.Uint16(body[at:])
		n := int(s.order.Uint16(body[at+2:]))
		if code == 0 {
			if n != 0 {
				return s.corrupt("end-of-options with length %d at block byte %d", n, 8+at)
			}
			return nil
		}
		padded := (n + 3) &^ 3
		if at+4+padded > len(body) {
			return s.corrupt("option %d of %d bytes at block byte %d runs past the block end", code, n, 8+at)
		}
		v := body[at+4 : at+4+n]
		switch {
		case typ == ngIDB && code == optIfTsresol:
			if n < 1 {
				return s.corrupt("if_tsresol option is empty")
			}
			if exp := v[0] & 0x7f; v[0]&0x80 != 0 && exp > 63 || v[0]&0x80 == 0 && exp > 19 {
				return s.corrupt("if_tsresol %#x is out of range", v[0])
			}
		case typ == ngIDB && code == optIfFilter && n < 1,
			typ == ngIDB && code == optIfTsoffset && n < 8,
			typ == ngISB && code >= 2 && code <= 5 && n < 8:
			return s.corrupt("option %d is %d bytes, too short", code, n)
		}
		at += 4 + padded
	}
	return nil
}

// minBlockLen is the smallest valid total length of a block type.
func minBlockLen(typ uint32) uint32 {
	switch typ {
	case ngSHB:
		return 28
	case ngIDB:
		return 20
	case ngPB, ngEPB:
		return 32
	case ngSPB:
		return 16
	case ngISB:
		return 24
	}
	return 12
}
