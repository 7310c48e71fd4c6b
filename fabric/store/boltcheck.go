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
// page that meta counts, that the freelist fits its pages, and that every
// page of the tree (buckets, branches, leaves) is a page of the file whose
// elements, keys and values lie within it. bbolt maps the file and reads all
// of that from memory unchecked, so a file cut short faults (SIGBUS) and a
// damaged page panics, instead of failing. It reads the whole tree: the
// manager's store is small. A missing or empty
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
	var free []uint64
	if m.freelist != boltNoFreelist {
		if free, err = checkBoltFreelist(r, m); err != nil {
			return damaged("%v", err)
		}
	}
	w := &boltWalker{r: r, m: m, seen: map[uint64]bool{}, budget: n / 16}
	if err := w.page(m.root, "the meta page"); err != nil {
		return damaged("%v", err)
	}
	// bbolt writes over free pages (the first commit on opening writes the
	// freelist): one the tree uses would be overwritten.
	for _, id := range free {
		if w.seen[id] {
			return damaged("page %d is both in use and on the freelist", id)
		}
	}
	return nil
}

// boltWalker walks the tree of pages as bbolt reads it (the root bucket,
// its buckets, their branch and leaf pages, inline buckets), checking that
// every page it reaches is a page of the file and every element, key and
// value lies within its page: bbolt reads them from the mapping unchecked,
// and faults or panics where they do not.
type boltWalker struct {
	r    io.ReaderAt
	m    boltMeta
	seen map[uint64]bool
	// budget is the elements a sound file can hold (16 bytes each): inline
	// buckets whose elements overlap would otherwise make the walk
	// exponential.
	budget int64
}

// page checks page id, which from names.
func (w *boltWalker) page(id uint64, from string) error {
	if id < 2 || id >= w.m.pgid {
		return fmt.Errorf("%s refers to page %d, outside the file's pages 2..%d", from, id, w.m.pgid-1)
	}
	if w.seen[id] {
		return fmt.Errorf("%s refers to page %d, which another page refers to as well", from, id)
	}
	flags, count, span, err := boltPage(w.r, w.m, id, "data", boltBranchFlag, boltLeafFlag)
	if err != nil {
		return err
	}
	for p := id; p < id+span/uint64(w.m.pageSize); p++ { // with its overflow pages
		if w.seen[p] || p == w.m.freelist {
			return fmt.Errorf("page %d runs into page %d, which is another page's", id, p)
		}
		w.seen[p] = true
	}
	b := make([]byte, span)
	if n, _ := w.r.ReadAt(b, int64(id*uint64(w.m.pageSize))); n < len(b) {
		return fmt.Errorf("page %d is cut short", id)
	}
	return w.elements(b, fmt.Sprintf("page %d", id), flags, count)
}

// elements checks the count elements of page p (a page of the file, or an
// inline bucket's page).
func (w *boltWalker) elements(p []byte, name string, flags, count uint16) error {
	const elem = 16 // both kinds: branch {pos, ksize, pgid}, leaf {flags, pos, ksize, vsize}
	if boltPageHeader+int(count)*elem > len(p) {
		return fmt.Errorf("%s: %d elements do not fit its %d bytes", name, count, len(p))
	}
	if w.budget -= int64(count); w.budget < 0 {
		return fmt.Errorf("%s: its elements overlap others (the tree has more elements than the file has room for)", name)
	}
	if flags == boltBranchFlag && count == 0 {
		return fmt.Errorf("%s: a branch page without elements", name)
	}
	e := binary.NativeEndian
	for i := range int(count) {
		at := boltPageHeader + i*elem
		el := p[at:]
		if flags == boltBranchFlag {
			// Keys lie at pos bytes from their element.
			if end := uint64(at) + uint64(e.Uint32(el[0:])) + uint64(e.Uint32(el[4:])); end > uint64(len(p)) {
				return fmt.Errorf("%s: element %d's key ends at byte %d, past its %d bytes", name, i, end, len(p))
			}
			if err := w.page(e.Uint64(el[8:]), name); err != nil {
				return err
			}
			continue
		}
		start := uint64(at) + uint64(e.Uint32(el[4:])) + uint64(e.Uint32(el[8:])) // the value's
		end := start + uint64(e.Uint32(el[12:]))
		if end > uint64(len(p)) {
			return fmt.Errorf("%s: element %d's key and value end at byte %d, past its %d bytes", name, i, end, len(p))
		}
		if e.Uint32(el[0:])&0x01 == 0 { // not a bucket
			continue
		}
		v := p[start:end]
		if len(v) < 16 {
			return fmt.Errorf("%s: element %d is a bucket of %d bytes, too short for one", name, i, len(v))
		}
		if root := e.Uint64(v); root != 0 {
			if err := w.page(root, name); err != nil {
				return err
			}
			continue
		}
		inline := v[16:] // a bucket small enough to live in its parent's value
		if len(inline) < boltPageHeader || e.Uint16(inline[8:]) != boltLeafFlag {
			return fmt.Errorf("%s: element %d is an inline bucket that is not a leaf page", name, i)
		}
		if err := w.elements(inline, fmt.Sprintf("%s's inline bucket %d", name, i), boltLeafFlag, e.Uint16(inline[10:])); err != nil {
			return err
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

// boltPage checks the header of page id: it says it is id, has one of the
// flags, and its overflow pages are within the file's pages. It returns its
// flags, its count and its span in bytes.
func boltPage(r io.ReaderAt, m boltMeta, id uint64, what string, flags ...uint16) (flag, count uint16, span uint64, err error) {
	var h [boltPageHeader]byte
	ps := uint64(m.pageSize)
	if n, _ := r.ReadAt(h[:], int64(id*ps)); n < len(h) {
		return 0, 0, 0, fmt.Errorf("%s page %d is beyond the end of the file", what, id)
	}
	e := binary.NativeEndian
	gotID, fl, overflow := e.Uint64(h[0:]), e.Uint16(h[8:]), uint64(e.Uint32(h[12:]))
	if gotID != id {
		return 0, 0, 0, fmt.Errorf("%s page %d says it is page %d", what, id, gotID)
	}
	ok := false
	for _, f := range flags {
		ok = ok || fl == f
	}
	if !ok {
		return 0, 0, 0, fmt.Errorf("%s page %d has page type %#x", what, id, fl)
	}
	if id+overflow >= m.pgid {
		return 0, 0, 0, fmt.Errorf("%s page %d runs %d pages on, past the %d pages of the file", what, id, overflow, m.pgid)
	}
	return fl, e.Uint16(h[10:]), (1 + overflow) * ps, nil
}

// checkBoltFreelist checks that the freelist fits its pages and lists only
// pages of the file, each once: bbolt reads it when it opens the file. It
// returns the free pages.
func checkBoltFreelist(r io.ReaderAt, m boltMeta) ([]uint64, error) {
	_, count16, span, err := boltPage(r, m, m.freelist, "freelist", boltFreelistFlag)
	if err != nil {
		return nil, err
	}
	off := int64(m.freelist * uint64(m.pageSize))
	data := uint64(boltPageHeader)
	count := uint64(count16)
	if count16 == 0xFFFF { // the real count is the first element
		var b [8]byte
		if n, _ := r.ReadAt(b[:], off+boltPageHeader); n < len(b) {
			return nil, fmt.Errorf("freelist page %d is cut short", m.freelist)
		}
		count = binary.NativeEndian.Uint64(b[:])
		data += 8
	}
	if count > (span-data)/8 {
		return nil, fmt.Errorf("freelist page %d lists %d pages, more than its %d bytes hold", m.freelist, count, span)
	}
	b := make([]byte, 8*count)
	if n, _ := r.ReadAt(b, off+int64(data)); n < len(b) {
		return nil, fmt.Errorf("freelist page %d is cut short", m.freelist)
	}
	free := make([]uint64, count)
	listed := make(map[uint64]bool, count)
	for i := range free {
		id := binary.NativeEndian.Uint64(b[8*i:])
		switch {
		case id < 2 || id >= m.pgid:
			return nil, fmt.Errorf("freelist page %d lists page %d, outside the file's pages 2..%d", m.freelist, id, m.pgid-1)
		case listed[id]:
			return nil, fmt.Errorf("freelist page %d lists page %d twice", m.freelist, id)
		case id >= m.freelist && id*uint64(m.pageSize) < m.freelist*uint64(m.pageSize)+span:
			return nil, fmt.Errorf("freelist page %d lists itself", m.freelist)
		}
		listed[id] = true
		free[i] = id
	}
	return free, nil
}
