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
