package trace

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func nsysSmall(tb testing.TB) string {
	tb.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "model", "nsys-small.sqlite")
}

// TestDecodeNsys reads the database written by testdata/model/gen_nsys.py.
func TestDecodeNsys(t *testing.T) {
	t.Parallel()
	w, err := DecodeFile(nsysSmall(t))
	if err != nil {
		t.Fatal(err)
	}
	if w.Name != "nsys-small" {
		t.Errorf("name %q", w.Name)
	}
	if got := [5]int{w.Count(Runtime), w.Count(Kernel), w.Count(Memcpy), w.Count(Memset), w.Count(Sync)}; got != [5]int{612, 600, 6, 1, 6} {
		t.Fatalf("counts runtime/kernel/memcpy/memset/sync = %v", got)
	}
	if len(w.Steps) != 2 || w.Steps[0].Num != 3 || w.Steps[1].Num != 4 || w.Steps[1].Start != 3_000_000 || w.Steps[1].Dur != 3_000_000 {
		t.Fatalf("steps %+v", w.Steps)
	}
	byCorr := map[int64][]Op{}
	for _, o := range w.Ops {
		byCorr[o.Corr] = append(byCorr[o.Corr], o)
	}
	// Row 150 of the generator: its launch and its kernel.
	ops := byCorr[3*150+1]
	if len(ops) != 2 {
		t.Fatalf("corr 451: %+v", ops)
	}
	call, k := ops[0], ops[1]
	if call.Kind != Runtime || call.Name != "cudaLaunchKernel" || call.Start != 1_500_000 || call.Dur != 5_000 ||
		call.TID != 1234<<24|5678 || call.PID != 1234 {
		t.Errorf("call = %+v", call)
	}
	if k.Kind != Kernel || k.Start != 1_506_000 || k.Dur != 2_000 || k.Stream != 7 || k.Device != 0 ||
		len(k.Name) != len("void gemm_kernel<>(float*)")+680 || !strings.HasPrefix(k.Name, "void gemm_kernel<kkk") {
		t.Errorf("kernel = %+v (name of %d bytes: the overflow pages)", k, len(k.Name))
	}
	cp := byCorr[3*200+2]
	if len(cp) != 2 || cp[1].Kind != Memcpy || cp[1].Copy != HtoD || !cp[1].Pageable || cp[1].Bytes != 4096 ||
		cp[1].Name != "Memcpy HtoD (Pageable -> Device)" {
		t.Errorf("memcpy = %+v", cp)
	}
	sy := byCorr[3*300+3]
	if len(sy) != 2 || sy[1].Kind != Sync || sy[1].SyncKind != SyncStream || sy[1].Stream != 7 {
		t.Errorf("sync = %+v", sy)
	}
	// Decode (from a stream) detects SQLite and gives the same.
	b, err := os.ReadFile(nsysSmall(t))
	if err != nil {
		t.Fatal(err)
	}
	w2, err := Decode(bytes.NewReader(b))
	if err != nil || len(w2.Ops) != len(w.Ops) || len(w2.Steps) != 2 {
		t.Fatalf("Decode: %v, %d ops", err, len(w2.Ops))
	}
}

func TestDecodeNsysErrors(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(nsysSmall(t))
	if err != nil {
		t.Fatal(err)
	}
	// Truncated: the pages past the cut are missing.
	_, err = DecodeNsys(bytes.NewReader(b[:len(b)/3]), int64(len(b)/3))
	var se *SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("truncated database: %v, want a SyntaxError", err)
	}
	// A page of the wrong type, with its offset.
	bad := bytes.Clone(b)
	bad[100] = 0x07 // page 1's b-tree type
	_, err = DecodeNsys(bytes.NewReader(bad), int64(len(bad)))
	if !errors.As(err, &se) || se.Offset != 100 || !strings.Contains(err.Error(), "type 0x07") {
		t.Fatalf("bad page type: %v", err)
	}
	// A database that is not an Nsight export.
	empty := bytes.Clone(b[:512])
	empty[100], empty[103], empty[104] = 0x0d, 0, 0 // page 1: a leaf with no cells
	copy(empty[28:32], []byte{0, 0, 0, 1})
	if _, err := DecodeNsys(bytes.NewReader(empty), 512); !errors.Is(err, ErrNoEvents) {
		t.Fatalf("empty database: %v, want ErrNoEvents", err)
	}
	bad = bytes.Clone(b)
	bad[16], bad[17] = 0, 100 // page size 100
	if _, err := DecodeNsys(bytes.NewReader(bad), int64(len(bad))); !errors.As(err, &se) || se.Offset != 16 {
		t.Fatalf("bad page size: %v", err)
	}
}

func TestParseColumns(t *testing.T) {
	t.Parallel()
	cols, rowid := parseColumns(`CREATE TABLE "T" (id INTEGER PRIMARY KEY, "value" TEXT NOT NULL, ref INT REFERENCES S(id, x), PRIMARY KEY (a, b))`)
	if strings.Join(cols, ",") != "id,value,ref" || rowid != 0 {
		t.Fatalf("columns %v rowid %d", cols, rowid)
	}
}

func TestVarint(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   []byte
		want uint64
		n    int
	}{
		{[]byte{0x7f}, 0x7f, 1},
		{[]byte{0x81, 0x00}, 0x80, 2},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, ^uint64(0), 9},
		{[]byte{0x81}, 0, 0},
	} {
		if got, n := varint(c.in); got != c.want || n != c.n {
			t.Errorf("varint(% x) = %#x, %d; want %#x, %d", c.in, got, n, c.want, c.n)
		}
	}
}

// FuzzDecodeNsys feeds mutated databases to the SQLite reader: it must
// return an error or a workload whose ops are sane, never panic or loop.
func FuzzDecodeNsys(f *testing.F) {
	if b, err := os.ReadFile(nsysSmall(f)); err == nil {
		f.Add(b[:4096], int64(4096))
		f.Add(b, int64(len(b)))
	}
	f.Add([]byte(sqliteMagic), int64(16))
	f.Fuzz(func(t *testing.T, data []byte, size int64) {
		if size < 0 || size > int64(len(data)) {
			size = int64(len(data))
		}
		w, err := DecodeNsys(bytes.NewReader(data), size)
		if err != nil {
			var se *SyntaxError
			if errors.As(err, &se) && (se.Offset < 0 || se.Offset > int64(len(data))) {
				t.Fatalf("offset %d outside %d bytes: %v", se.Offset, len(data), err)
			}
			return
		}
		for _, o := range w.Ops {
			if o.Dur < 0 || o.Kind < Runtime || o.Kind > Sync {
				t.Fatalf("bad op %+v", o)
			}
		}
	})
}
