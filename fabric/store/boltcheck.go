package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/bits"
	"os"
)

// ErrDamaged: the store file is not a sound bbolt file (cut short,
// overwritten, or not a bbolt file at all).
var ErrDamaged = errors.New("store: file damaged")

// bbolt's on-disk layout (go.etcd.io/bbolt/internal/common), in the
// machine's byte order: a 16-byte page header, then for meta pages the meta.
const (
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	boltPageHeader   = 16
	boltMetaEnd      = boltPageHeader + 64 // meta: 4+4+4+4 + root 16 + 4*8
	boltSumEnd       = boltPageHeader + 56 // the checksum covers the meta up to itself
	boltBranchFlag   = 0x01
	boltLeafFlag     = 0x02
	boltFreelistFlag = 0x10
	boltNoFreelist   = ^uint64(0)
	boltMinPageSize  = 1 << 10 // bbolt looks for the second meta page
	boltMaxPageSize  = 1 << 24 // at 1 KiB << 0..14
)

type boltMeta struct {
	pageSize                 uint32
	root, freelist, pgid, tx uint64
}

// readBoltMeta reads the meta page at off; why says what is wrong when it
// is not a valid meta (beyond the end, bad magic, version or checksum).
func readBoltMeta(r io.ReaderAt, off int64) (m boltMeta, why string) {
	var b [boltMetaEnd]byte
	if n, _ := r.ReadAt(b[:], off); n < len(b) {
		return m, "beyond the end of the file"
	}
	e := binary.NativeEndian
	switch {
	case e.Uint32(b[16:]) != boltMagic:
		return m, "no bbolt magic"
	case e.Uint32(b[20:]) != boltVersion:
		return m, fmt.Sprintf("format version %d, want %d", e.Uint32(b[20:]), boltVersion)
	}
	h := fnv.New64a()
	h.Write(b[boltPageHeader:boltSumEnd])
	if h.Sum64() != e.Uint64(b[boltSumEnd:]) {
		return m, "checksum mismatch"
	}
	return boltMeta{pageSize: e.Uint32(b[24:]), root: e.Uint64(b[32:]), freelist: e.Uint64(b[48:]),
		pgid: e.Uint64(b[56:]), tx: e.Uint64(b[64:])}, ""
}

// CheckBoltFile checks what bbolt trusts before it maps the file: that a
// meta page is valid (magic, version, checksum), that the file holds every
// page that meta counts, and that the root and freelist pages it names are
// what they should be. bbolt maps the file and reads those pages from memory,
// so a file cut short faults (SIGBUS) instead of failing. A missing or empty
// file passes: bbolt creates a new store in it. Errors wrap ErrDamaged and
// end with what to do.
func CheckBoltFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	defer f.Close()
	if err := checkBolt(f, func() (int64, error) {
		st, err := f.Stat()
		if err != nil {
			return 0, err
		}
		return st.Size(), nil
	}); err != nil {
		if errors.Is(err, ErrDamaged) {
			return damagedFile(path, err)
		}
		return fmt.Errorf("store: %s: %w", path, err)
	}
	return nil
}

// checkBolt is CheckBoltFile on the file's contents. size is asked once the
// metas are read: a manager holding the file only grows it, before it writes
// a meta that counts the new pages.
func checkBolt(r io.ReaderAt, size func() (int64, error)) error {
	var first [1]byte
	if n, err := r.ReadAt(first[:], 0); n == 0 {
		if errors.Is(err, io.EOF) {
			return nil // empty: bbolt initialises it
		}
		return err
	}
	damaged := func(format string, a ...any) error { return damagedError(fmt.Sprintf(format, a...)) }
	// Page size from the first meta, else from the second (bbolt tries
	// 1 KiB << 0..14 for it, as we do).
	m0, why0 := readBoltMeta(r, 0)
	var m1 boltMeta
	why1 := "not found at any page size"
	if why0 == "" {
		m1, why1 = readBoltMeta(r, int64(m0.pageSize))
	} else {
		for ps := int64(boltMinPageSize); ps <= boltMaxPageSize; ps <<= 1 {
			if m, why := readBoltMeta(r, ps); why == "" && int64(m.pageSize) == ps {
				m1, why1 = m, ""
				break
			}
		}
	}
	if why0 != "" && why1 != "" {
		return damaged("not a bbolt file, or its first pages are overwritten (meta page 0: %s; meta page 1: %s)", why0, why1)
	}
	// bbolt uses the valid meta with the higher transaction ID.
	m := m0
	if why0 != "" || why1 == "" && m1.tx > m0.tx {
		m = m1
	}
	ps := uint64(m.pageSize)
	if ps < boltMinPageSize || ps > boltMaxPageSize || bits.OnesCount64(ps) != 1 {
		return damaged("meta page gives page size %d, not a power of two in 1 KiB..16 MiB", ps)
	}
	if m.pgid < 2 || m.root < 2 || m.root >= m.pgid || m.freelist != boltNoFreelist && (m.freelist < 2 || m.freelist >= m.pgid) {
		return damaged("meta page (transaction %d) is inconsistent: %d pages, root page %d, freelist page %d", m.tx, m.pgid, m.root, int64(m.freelist))
	}
	n, err := size()
	if err != nil {
		return err
	}
	if uint64(n)/ps < m.pgid {
		need := "more than 2^64"
		if hi, lo := bits.Mul64(m.pgid, ps); hi == 0 {
			need = fmt.Sprint(lo)
		}
		return damaged("file is %d bytes but its meta page (transaction %d) counts %d pages of %d bytes (%s bytes): it was cut short",
			n, m.tx, m.pgid, ps, need)
	}
	if err := checkBoltPage(r, m, m.root, "root", boltBranchFlag, boltLeafFlag); err != nil {
		return damaged("%v", err)
	}
	if m.freelist != boltNoFreelist {
		if err := checkBoltFreelist(r, m); err != nil {
			return damaged("%v", err)
		}
	}
	return nil
}

// damagedFile words err (a damagedError) for the file at path, with what to
// do about it.
func damagedFile(path string, err error) error {
	return fmt.Errorf("store: %s is damaged: %w; restore it from a backup, or move it aside to start with an empty pool", path, err)
}

// damagedError is an ErrDamaged without its text, which CheckBoltFile
// words itself.
type damagedError string

func (e damagedError) Error() string        { return string(e) }
func (e damagedError) Is(target error) bool { return target == ErrDamaged }

// checkBoltPage checks the header of page id: it says it is id, has one of
// the flags, and its overflow pages are within the file's pages.
func checkBoltPage(r io.ReaderAt, m boltMeta, id uint64, what string, flags ...uint16) error {
	_, _, err := boltPage(r, m, id, what, flags...)
	return err
}

// boltPage is checkBoltPage, returning the header's count and the page's
// span in bytes.
func boltPage(r io.ReaderAt, m boltMeta, id uint64, what string, flags ...uint16) (count uint16, span uint64, err error) {
	var h [boltPageHeader]byte
	ps := uint64(m.pageSize)
	if n, _ := r.ReadAt(h[:], int64(id*ps)); n < len(h) {
		return 0, 0, fmt.Errorf("%s page %d is beyond the end of the file", what, id)
	}
	e := binary.NativeEndian
	gotID, fl, overflow := e.Uint64(h[0:]), e.Uint16(h[8:]), uint64(e.Uint32(h[12:]))
	if gotID != id {
		return 0, 0, fmt.Errorf("%s page %d says it is page %d", what, id, gotID)
	}
	ok := false
	for _, f := range flags {
		ok = ok || fl == f
	}
	if !ok {
		return 0, 0, fmt.Errorf("%s page %d has page type %#x", what, id, fl)
	}
	if id+overflow >= m.pgid {
		return 0, 0, fmt.Errorf("%s page %d runs %d pages on, past the %d pages of the file", what, id, overflow, m.pgid)
	}
	return e.Uint16(h[10:]), (1 + overflow) * ps, nil
}

// checkBoltFreelist checks that the freelist fits its pages and lists only
// pages of the file: bbolt reads it when it opens the file.
func checkBoltFreelist(r io.ReaderAt, m boltMeta) error {
	count16, span, err := boltPage(r, m, m.freelist, "freelist", boltFreelistFlag)
	if err != nil {
		return err
	}
	off := int64(m.freelist * uint64(m.pageSize))
	data := uint64(boltPageHeader)
	count := uint64(count16)
	if count16 == 0xFFFF { // the real count is the first element
		var b [8]byte
		if n, _ := r.ReadAt(b[:], off+boltPageHeader); n < len(b) {
			return fmt.Errorf("freelist page %d is cut short", m.freelist)
		}
		count = binary.NativeEndian.Uint64(b[:])
		data += 8
	}
	if count > (span-data)/8 {
		return fmt.Errorf("freelist page %d lists %d pages, more than its %d bytes hold", m.freelist, count, span)
	}
	b := make([]byte, 8*count)
	if n, _ := r.ReadAt(b, off+int64(data)); n < len(b) {
		return fmt.Errorf("freelist page %d is cut short", m.freelist)
	}
	for i := range count {
		if id := binary.NativeEndian.Uint64(b[8*i:]); id < 2 || id >= m.pgid {
			return fmt.Errorf("freelist page %d lists page %d, outside the file's %d pages", m.freelist, id, m.pgid)
		}
	}
	return nil
}
