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
