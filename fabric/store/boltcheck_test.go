package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// boltFile returns the bytes of a closed store holding keys box/000..,
// enough of them that the bucket spans pages of its own.
func boltFile(t testing.TB, keys int) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "src.db")
	s, err := OpenBolt(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ops []Op
	for i := range keys {
		ops = append(ops, Put(fmt.Sprintf("box/%03d", i), bytes.Repeat([]byte{byte(i)}, 100)))
	}
	if err := s.Apply(context.Background(), ops...); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// currentMeta returns the meta bbolt uses: of both valid ones, the one
// with the higher transaction ID.
func currentMeta(t *testing.T, b []byte) boltMeta {
	t.Helper()
	m, why := readBoltMeta(bytes.NewReader(b), 0)
	m1, why1 := readBoltMeta(bytes.NewReader(b), int64(m.pageSize))
	if why != "" || why1 != "" {
		t.Fatalf("fresh store: metas %q %q", why, why1)
	}
	if m1.tx > m.tx {
		return m1
	}
	return m
}

// openCopy writes b to a new file and opens it as a store.
func openCopy(t *testing.T, b []byte) (string, *Bolt, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := OpenBolt(path, time.Second)
	return path, s, err
}

func wantDamaged(t *testing.T, what, path string, err error, detail string) {
	t.Helper()
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("%s: %v, want ErrDamaged", what, err)
	}
	msg := err.Error()
	for _, w := range []string{path + " is damaged", detail, "restore it from a backup, or move it aside"} {
		if !strings.Contains(msg, w) {
			t.Errorf("%s: %q does not say %q", what, msg, w)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("%s: error of several lines: %q", what, msg)
	}
}

// TestOpenBoltCutShort: a store cut at any length fails with ErrDamaged
// while it lacks pages its meta counts (bbolt maps the file and would fault
// with SIGBUS reading them, killing the test binary), and opens with every
// key once the cut spares them.
func TestOpenBoltCutShort(t *testing.T) {
	t.Parallel()
	b := boltFile(t, 200)
	m := currentMeta(t, b)
	need := int(m.pgid) * int(m.pageSize)
	if need > len(b) || need < 8*int(m.pageSize) {
		t.Fatalf("fresh store of %d bytes counts %d bytes of pages", len(b), need)
	}
	for n := 1; n <= need+int(m.pageSize); n += 509 {
		path, s, err := openCopy(t, b[:min(n, len(b))])
		if n < need {
			detail := "cut short"
			if n < 2*int(m.pageSize) {
				detail = "" // the second meta page is gone as well: not the first check to fail
			}
			wantDamaged(t, fmt.Sprintf("cut to %d of %d bytes", n, need), path, err, detail)
			continue
		}
		if err != nil {
			t.Fatalf("cut to %d of %d bytes: %v", n, need, err)
		}
		kvs, err := s.List(context.Background(), "box/")
		s.Close()
		if err != nil || len(kvs) != 200 {
			t.Fatalf("cut to %d bytes: %d keys, %v", n, len(kvs), err)
		}
	}
}

// TestOpenBoltDamaged: files that are not sound stores fail with one line
// that names the file, what is wrong and what to do; an empty file and a
// file with one bad meta page (bbolt uses the other) open.
func TestOpenBoltDamaged(t *testing.T) {
	t.Parallel()
	b := boltFile(t, 200)
	m := currentMeta(t, b)
	ps := int(m.pageSize)
	garbage := make([]byte, 50000)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range garbage {
		garbage[i] = byte(rng.Uint32())
	}
	overwrite := func(page int, with byte) []byte {
		c := bytes.Clone(b)
		for i := page * ps; i < (page+1)*ps; i++ {
			c[i] = with
		}
		return c
	}
	// The tree: the bucket's branch page and one of its leaves.
	branch, leaf := 0, 0
	for id := 2; id < int(m.pgid); id++ {
		switch binary.NativeEndian.Uint16(b[id*ps+8:]) {
		case boltBranchFlag:
			branch = id
		case boltLeafFlag:
			if id != int(m.root) && leaf == 0 {
				leaf = id
			}
		}
	}
	if branch == 0 || leaf == 0 {
		t.Fatalf("no branch and leaf pages in a store of %d keys", 200)
	}
	branchTo := func(child uint64) []byte {
		c := bytes.Clone(b)
		binary.NativeEndian.PutUint64(c[branch*ps+boltPageHeader+8:], child)
		return c
	}
	leafKeyAt := func(pos uint32) []byte {
		c := bytes.Clone(b)
		binary.NativeEndian.PutUint32(c[leaf*ps+boltPageHeader+4:], pos)
		return c
	}
	bothMetas := bytes.Clone(b)
	copy(bothMetas, make([]byte, 2*ps))
	for _, tc := range []struct {
		name   string
		file   []byte
		detail string
	}{
		{"garbage", garbage, "not a bbolt file"},
		{"zeros", make([]byte, 20000), "not a bbolt file"},
		{"both metas zeroed", bothMetas, "not a bbolt file"},
		{"root page overwritten", overwrite(int(m.root), 0xff), fmt.Sprintf("data page %d says it is page", m.root)},
		{"leaf page overwritten", overwrite(leaf, 0x5a), fmt.Sprintf("data page %d says it is page", leaf)},
		{"branch to no page", branchTo(9999), "refers to page 9999, outside the file's pages"},
		{"branch to the meta page", branchTo(1), "refers to page 1, outside"},
		{"branch to itself", branchTo(uint64(branch)), fmt.Sprintf("refers to page %d, which another page refers to as well", branch)},
		{"leaf key out of its page", leafKeyAt(1 << 20), fmt.Sprintf("page %d: element 0's key and value end at byte", leaf)},
		{"freelist page overwritten", overwrite(int(m.freelist), 0), fmt.Sprintf("freelist page %d says it is page 0", m.freelist)},
	} {
		path, s, err := openCopy(t, tc.file)
		if err == nil {
			s.Close()
		}
		wantDamaged(t, tc.name, path, err, tc.detail)
	}

	for _, tc := range []struct {
		name string
		file []byte
		keys int
	}{
		{"empty", nil, 0},
		{"meta 0 zeroed", overwrite(0, 0), -1}, // an older transaction's keys
		{"meta 1 zeroed", overwrite(1, 0), -1},
	} {
		_, s, err := openCopy(t, tc.file)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		kvs, err := s.List(context.Background(), "")
		s.Close()
		if err != nil || tc.keys >= 0 && len(kvs) != tc.keys {
			t.Fatalf("%s: %d keys, %v", tc.name, len(kvs), err)
		}
	}
}

// FuzzCheckBolt checks arbitrary bytes as a store file: no panic, every
// refusal is ErrDamaged, an empty file passes, a file that passes keeps
// passing with bytes added at its end (the check never reads past the pages
// a meta counts, and a store only grows), and bbolt opens a file that passes
// and lists its keys without a panic or a fault (which would kill the
// fuzzing process).
func FuzzCheckBolt(f *testing.F) {
	b := boltFile(f, 40)
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Add(b[:5000])
	f.Add(make([]byte, 8192))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		check := func(in []byte) error {
			return checkBolt(bytes.NewReader(in), func() (int64, error) { return int64(len(in)), nil })
		}
		err := check(in)
		if err != nil && !errors.Is(err, ErrDamaged) {
			t.Fatalf("refusal without ErrDamaged: %v", err)
		}
		if len(in) == 0 && err != nil {
			t.Fatalf("empty file refused: %v", err)
		}
		if err == nil && len(in) > 0 {
			if err := check(append(bytes.Clone(in), make([]byte, 4096)...)); err != nil {
				t.Fatalf("passes, then fails once grown: %v", err)
			}
			path := filepath.Join(t.TempDir(), "m.db")
			os.WriteFile(path, in, 0o600)
			s, err := OpenBolt(path, time.Second)
			if err != nil {
				return // a "dxpu" key that is not a bucket, say
			}
			defer s.Close()
			s.List(context.Background(), "")
		}
	})
}

// TestCheckBoltFileSoundStores: stores as the manager leaves them pass,
// whatever their history: an inline bucket, then hundreds of commits of
// puts and deletes with values from a few bytes to several pages (overflow
// pages, freed pages on the freelist), checked while open and after.
func TestCheckBoltFileSoundStores(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "m.db")
	s, err := OpenBolt(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range 300 {
		var ops []Op
		for range 1 + rng.IntN(8) {
			key := fmt.Sprintf("alloc/%03d", rng.IntN(150))
			if rng.IntN(4) == 0 {
				ops = append(ops, Delete(key))
			} else {
				ops = append(ops, Put(key, bytes.Repeat([]byte{byte(i)}, 1+rng.IntN([]int{64, 1000, 12000}[rng.IntN(3)]))))
			}
		}
		if err := s.Apply(context.Background(), ops...); err != nil {
			t.Fatal(err)
		}
		if i%25 == 0 || i < 5 {
			if err := CheckBoltFile(path); err != nil {
				t.Fatalf("after commit %d: %v", i, err)
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := CheckBoltFile(path); err != nil {
		t.Fatalf("closed: %v", err)
	}
}
