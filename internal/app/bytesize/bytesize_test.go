package bytesize

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]uint64{"64M": 64 << 20, "4096": 4096, "0x1000": 0x1000, "1G": 1 << 30, "2k": 2048, "1T": 1 << 40} {
		if got, err := Parse("x", in); err != nil || got != want {
			t.Errorf("%q: %d, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "M", "12Q", "-1", "99999999999999999999T"} {
		if _, err := Parse("x", in); err == nil || !strings.Contains(err.Error(), "--x") {
			t.Errorf("%q: %v, want an error naming --x", in, err)
		}
	}
}

func TestParseList(t *testing.T) {
	t.Parallel()
	got, err := ParseList("sizes", "64K, 1M,4096")
	if err != nil || len(got) != 3 || got[0] != 64<<10 || got[1] != 1<<20 || got[2] != 4096 {
		t.Fatalf("%v %v", got, err)
	}
	if got, err := ParseList("sizes", ""); err != nil || got != nil {
		t.Fatalf("empty: %v %v", got, err)
	}
	if _, err := ParseList("sizes", "64K,lots"); err == nil || !strings.Contains(err.Error(), `--sizes "lots"`) {
		t.Fatalf("bad element: %v", err)
	}
	if _, err := ParseList("sizes", "64M,,1M"); err == nil || err.Error() != `--sizes "64M,,1M": item 2 is empty` {
		t.Fatalf("empty element: %v", err)
	}
}

// TestFormat: Format writes what Parse reads back, with the largest
// suffix that divides the count.
func TestFormat(t *testing.T) {
	t.Parallel()
	for n, want := range map[uint64]string{64 << 10: "64K", 16 << 20: "16M", 1 << 30: "1G", 3 << 29: "1536M", 1000: "1000", 1536: "1536", 0: "0"} {
		got := Format(n)
		if got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
		if back, err := Parse("x", got); err != nil || back != n {
			t.Errorf("Parse(Format(%d)) = %d, %v", n, back, err)
		}
	}
}

// TestValue: a byte-count flag reads what Parse reads into its own
// number type, writes the count as Format does, and refuses, in one line
// saying what a count looks like, what is not one or does not fit.
func TestValue(t *testing.T) {
	t.Parallel()
	var n int
	v := NewValue(&n, 512)
	if n != 512 || v.String() != "512" || v.Type() != "bytes" {
		t.Fatalf("default: %d %q %q", n, v.String(), v.Type())
	}
	for in, want := range map[string]int{"4K": 4096, "0x1000": 4096, "1m": 1 << 20, "9000": 9000, "0": 0, "1536": 1536} {
		if err := v.Set(in); err != nil || n != want || v.String() != Format(uint64(want)) {
			t.Errorf("Set(%q): %d (%q), %v; want %d", in, n, v.String(), err, want)
		}
	}
	if _ = v.Set("1536"); v.String() != "1536" {
		t.Errorf("1536 written %q", v.String())
	}
	if n = 64 << 20; v.String() != "64M" {
		t.Errorf("64 MiB written %q, want 64M", v.String())
	}
	n = 7
	for _, in := range []string{"4Q", "-3", "", "1.5K", "99999999999T", "8E"} {
		err := v.Set(in)
		if err == nil || !strings.Contains(err.Error(), "want ") || strings.Contains(err.Error(), "strconv") || strings.ContainsAny(err.Error(), "\n") {
			t.Errorf("Set(%q): %v, want a one-line refusal saying what a count looks like", in, err)
		}
		if n != 7 {
			t.Errorf("a refused Set(%q) changed the count to %d", in, n)
		}
	}
	var u uint32
	w := NewValue(&u, 0)
	if err := w.Set("4G"); err == nil || err.Error() != "want at most 4294967295 bytes" {
		t.Errorf("4G into a uint32: %v", err)
	}
	if err := w.Set("4095M"); err != nil || u != 4095<<20 {
		t.Errorf("4095M into a uint32: %d, %v", u, err)
	}
	var b uint64
	if err := NewValue(&b, 0).Set("16T"); err != nil || b != 16<<40 {
		t.Errorf("16T into a uint64: %d, %v", b, err)
	}
}
