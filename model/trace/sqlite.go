package trace

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strings"
)

// sqliteDB is a minimal read-only reader of the SQLite 3 file format
// (https://www.sqlite.org/fileformat.html), enough to scan the tables of
// an Nsight Systems export: table b-trees, records, overflow pages. It
// reads pages on demand through an io.ReaderAt and keeps none.
type sqliteDB struct {
	r        io.ReaderAt
	pageSize int
	usable   int
	pages    uint32
	page     []byte // the current b-tree page
	ovPage   []byte // the current overflow page
	over     []byte // scratch for payloads that spill onto overflow pages
}

// sqliteMagic starts every SQLite 3 database file.
const sqliteMagic = "SQLite format 3\x00"

// sqliteError reports a malformed database at a byte offset of the file.
func sqliteError(off int64, format string, a ...any) error {
	return &SyntaxError{Offset: off, Msg: "sqlite: " + fmt.Sprintf(format, a...)}
}

func openSQLite(r io.ReaderAt, size int64) (*sqliteDB, error) {
	var h [100]byte
	if n, err := r.ReadAt(h[:], 0); n < len(h) {
		return nil, sqliteError(int64(n), "header truncated: %v", err)
	}
	if string(h[:16]) != sqliteMagic {
		return nil, sqliteError(0, "not an SQLite 3 database")
	}
	ps := int(binary.BigEndian.Uint16(h[16:18]))
	if ps == 1 {
		ps = 65536
	}
	if ps < 512 || ps > 65536 || ps&(ps-1) != 0 {
		return nil, sqliteError(16, "page size %d is not a power of two in 512..65536", ps)
	}
	usable := ps - int(h[20])
	if usable < 480 {
		return nil, sqliteError(20, "usable page size %d below 480", usable)
	}
	if enc := binary.BigEndian.Uint32(h[56:60]); enc > 1 {
		return nil, sqliteError(56, "text encoding %d: only UTF-8 databases are read", enc)
	}
	pages := uint32(size / int64(ps))
	return &sqliteDB{r: r, pageSize: ps, usable: usable, pages: pages, page: make([]byte, ps), ovPage: make([]byte, ps)}, nil
}

// readPage loads page n (1-based) into db.page.
func (db *sqliteDB) readPage(n uint32) error { return db.readPageInto(db.page, n) }

func (db *sqliteDB) readPageInto(buf []byte, n uint32) error {
	if n < 1 || n > db.pages {
		return sqliteError(0, "page %d out of range 1..%d", n, db.pages)
	}
	off := int64(n-1) * int64(db.pageSize)
	if m, err := db.r.ReadAt(buf, off); m < db.pageSize {
		return sqliteError(off+int64(m), "page %d truncated: %v", n, err)
	}
	return nil
}

// sqliteValue is one column of a record: nil, int64, float64, or a string
// (text and blob alike) that is valid only until the next row.
type sqliteValue struct {
	kind byte // 'n' null, 'i' integer, 'f' float, 's' text or blob
	i    int64
	f    float64
	s    []byte
}

func (v sqliteValue) int() (int64, bool) {
	switch v.kind {
	case 'i':
		return v.i, true
	case 'f':
		if math.IsNaN(v.f) || math.Abs(v.f) > 9e18 {
			return 0, false
		}
		return int64(v.f), true
	}
	return 0, false
}

// varint decodes an SQLite varint from b: 1 to 9 bytes, big-endian, seven
// bits per byte with the high bit set to continue, eight in a ninth byte.
func varint(b []byte) (uint64, int) {
	var v uint64
	for i := 0; i < 8; i++ {
		if i >= len(b) {
			return 0, 0
		}
		v = v<<7 | uint64(b[i]&0x7f)
		if b[i] < 0x80 {
			return v, i + 1
		}
	}
	if len(b) < 9 {
		return 0, 0
	}
	return v<<8 | uint64(b[8]), 9
}

// scanTable walks the table b-tree rooted at page root in rowid order and
// calls fn for each row; row holds the record's columns (reused between
// calls).
func (db *sqliteDB) scanTable(root uint32, fn func(rowid int64, row []sqliteValue) error) error {
	type frame struct {
		page uint32
		cell int // next child to visit; ncells means the right-most pointer
	}
	var row []sqliteValue
	stack := []frame{{page: root}}
	visited := 0
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if err := db.readPage(top.page); err != nil {
			return err
		}
		base := int64(top.page-1) * int64(db.pageSize)
		hdr := 0
		if top.page == 1 {
			hdr = 100
		}
		p := db.page
		kind := p[hdr]
		ncells := int(binary.BigEndian.Uint16(p[hdr+3:]))
		switch kind {
		case 0x0d: // table leaf
			ptrs := hdr + 8
			if ptrs+2*ncells > db.usable {
				return sqliteError(base+int64(hdr+3), "page %d: %d cells do not fit", top.page, ncells)
			}
			for c := 0; c < ncells; c++ {
				off := int(binary.BigEndian.Uint16(db.page[ptrs+2*c:]))
				if off < ptrs || off >= db.usable {
					return sqliteError(base+int64(ptrs+2*c), "page %d: cell %d at offset %d, outside the page", top.page, c, off)
				}
				rowid, payload, err := db.cell(top.page, base, off)
				if err != nil {
					return err
				}
				if row, err = decodeRecord(payload, row[:0], base+int64(off)); err != nil {
					return err
				}
				if err := fn(rowid, row); err != nil {
					return err
				}
			}
			stack = stack[:len(stack)-1]
		case 0x05: // table interior
			ptrs := hdr + 12
			if ptrs+2*ncells > db.usable {
				return sqliteError(base+int64(hdr+3), "page %d: %d cells do not fit", top.page, ncells)
			}
			var child uint32
			if top.cell < ncells {
				off := int(binary.BigEndian.Uint16(p[ptrs+2*top.cell:]))
				if off+4 > db.usable {
					return sqliteError(base+int64(ptrs+2*top.cell), "page %d: cell offset %d beyond the page", top.page, off)
				}
				child = binary.BigEndian.Uint32(p[off:])
			} else if top.cell == ncells {
				child = binary.BigEndian.Uint32(p[hdr+8:])
			} else {
				stack = stack[:len(stack)-1]
				continue
			}
			top.cell++
			if len(stack) > 64 {
				return sqliteError(base, "page %d: b-tree deeper than 64 levels (a loop?)", top.page)
			}
			if visited++; visited > int(db.pages) {
				return sqliteError(base, "table visits more pages than the file holds (a loop?)")
			}
			stack = append(stack, frame{page: child})
		default:
			return sqliteError(base+int64(hdr), "page %d: type 0x%02x is not a table b-tree page", top.page, kind)
		}
	}
	return nil
}

// cell returns the rowid and the whole payload of the table-leaf cell at
// off in db.page, following overflow pages when it spills.
func (db *sqliteDB) cell(page uint32, base int64, off int) (int64, []byte, error) {
	p := db.page[:db.usable]
	if off < 8 || off >= len(p) {
		return 0, nil, sqliteError(base+int64(off), "page %d: cell offset %d beyond the page", page, off)
	}
	size, n := varint(p[off:])
	if n == 0 {
		return 0, nil, sqliteError(base+int64(off), "page %d: truncated payload size", page)
	}
	off += n
	rowid, n := varint(p[off:])
	if n == 0 {
		return 0, nil, sqliteError(base+int64(off), "page %d: truncated rowid", page)
	}
	off += n
	if size > 1<<30 {
		return 0, nil, sqliteError(base+int64(off), "page %d: payload of %d bytes", page, size)
	}
	// How much of the payload stays on the page (file format section 1.6).
	u := db.usable
	x := u - 35
	local := int(size)
	if local > x {
		m := ((u-12)*32)/255 - 23
		k := m + (int(size)-m)%(u-4)
		if k <= x {
			local = k
		} else {
			local = m
		}
	}
	if off+local > len(p) {
		return 0, nil, sqliteError(base+int64(off), "page %d: payload runs past the page", page)
	}
	if local == int(size) {
		return int64(rowid), p[off : off+local], nil
	}
	if off+local+4 > len(p) {
		return 0, nil, sqliteError(base+int64(off+local), "page %d: overflow pointer past the page", page)
	}
	db.over = append(db.over[:0], p[off:off+local]...)
	next := binary.BigEndian.Uint32(p[off+local:])
	for hops := 0; len(db.over) < int(size); hops++ {
		if next == 0 || hops > int(db.pages) {
			return 0, nil, sqliteError(base+int64(off), "page %d: overflow chain ends after %d of %d bytes", page, len(db.over), size)
		}
		if err := db.readPageInto(db.ovPage, next); err != nil {
			return 0, nil, err
		}
		chunk := db.ovPage[4:db.usable]
		if want := int(size) - len(db.over); len(chunk) > want {
			chunk = chunk[:want]
		}
		db.over = append(db.over, chunk...)
		next = binary.BigEndian.Uint32(db.ovPage)
	}
	return int64(rowid), db.over, nil
}

// decodeRecord splits a record (header of serial types, then values) into
// row; off is the payload's file offset, for errors.
func decodeRecord(b []byte, row []sqliteValue, off int64) ([]sqliteValue, error) {
	hsize, n := varint(b)
	if n == 0 || hsize > uint64(len(b)) || hsize < uint64(n) {
		return row, sqliteError(off, "record header size %d does not fit %d bytes", hsize, len(b))
	}
	h := b[n:hsize]
	body := b[hsize:]
	for len(h) > 0 {
		st, n := varint(h)
		if n == 0 {
			return row, sqliteError(off, "truncated record header")
		}
		h = h[n:]
		var v sqliteValue
		size := 0
		switch {
		case st == 0:
			v.kind = 'n'
		case st >= 1 && st <= 6:
			size = []int{0, 1, 2, 3, 4, 6, 8}[st]
		case st == 7:
			size = 8
		case st == 8 || st == 9:
			v.kind, v.i = 'i', int64(st-8)
		case st >= 12:
			size = int((st - 12) / 2)
		default:
			return row, sqliteError(off, "reserved serial type %d", st)
		}
		if size > len(body) {
			return row, sqliteError(off, "record value of %d bytes past the end of the record", size)
		}
		val := body[:size]
		body = body[size:]
		switch {
		case st >= 1 && st <= 6:
			var x int64
			if val[0]&0x80 != 0 {
				x = -1
			}
			for _, c := range val {
				x = x<<8 | int64(c)
			}
			v.kind, v.i = 'i', x
		case st == 7:
			v.kind, v.f = 'f', math.Float64frombits(binary.BigEndian.Uint64(val))
		case st >= 12:
			v.kind, v.s = 's', val
		}
		row = append(row, v)
	}
	return row, nil
}

// sqliteTable is a table found in sqlite_schema.
type sqliteTable struct {
	root    uint32
	columns []string // in declaration order
	rowidAs int      // the INTEGER PRIMARY KEY column, which records store as NULL; -1 if none
}

// tables reads sqlite_schema (the b-tree on page 1).
func (db *sqliteDB) tables() (map[string]sqliteTable, error) {
	out := map[string]sqliteTable{}
	err := db.scanTable(1, func(_ int64, row []sqliteValue) error {
		if len(row) < 5 || row[0].kind != 's' || string(row[0].s) != "table" || row[1].kind != 's' {
			return nil
		}
		root, ok := row[3].int()
		if !ok || root < 1 || root > math.MaxUint32 {
			return nil
		}
		cols, rowidAs := parseColumns(string(row[4].s))
		out[string(row[1].s)] = sqliteTable{root: uint32(root), columns: cols, rowidAs: rowidAs}
		return nil
	})
	return out, err
}

// parseColumns reads the column names from a CREATE TABLE statement.
func parseColumns(sql string) ([]string, int) {
	open := strings.IndexByte(sql, '(')
	close := strings.LastIndexByte(sql, ')')
	if open < 0 || close <= open {
		return nil, -1
	}
	var defs []string
	depth, start := 0, open+1
	for i := open + 1; i < close; i++ {
		switch sql[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				defs = append(defs, sql[start:i])
				start = i + 1
			}
		}
	}
	defs = append(defs, sql[start:close])
	var cols []string
	rowidAs := -1
	for _, d := range defs {
		f := strings.Fields(d)
		if len(f) == 0 {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "PRIMARY", "UNIQUE", "CHECK", "FOREIGN", "CONSTRAINT":
			continue
		}
		name := strings.Trim(f[0], "\"`[]'")
		if len(f) >= 4 && strings.EqualFold(f[1], "INTEGER") && strings.EqualFold(f[2], "PRIMARY") && strings.EqualFold(f[3], "KEY") {
			rowidAs = len(cols)
		}
		cols = append(cols, name)
	}
	return cols, rowidAs
}

// isSQLite reports whether b starts like an SQLite database.
func isSQLite(b []byte) bool { return bytes.HasPrefix(b, []byte(sqliteMagic)) }
