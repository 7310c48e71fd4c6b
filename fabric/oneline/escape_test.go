package oneline

import "testing"

func TestEscapeAndName(t *testing.T) {
	for _, c := range []struct{ in, escaped, name string }{
		{"plain: café ok", "plain: café ok", "plain: café ok"},
		{"a\nb", `a\nb`, `"a\nb"`},
		{"k\r", `k\r`, `"k\r"`},
		{"\x1b[2Jx", `\x1b[2Jx`, `"\x1b[2Jx"`},
		{"caf\xe9", `caf\xe9`, `"caf\xe9"`},
		{"x\u2028y\tz", `x\u2028y\tz`, `"x\u2028y\tz"`},
		{"", "", `""`},
	} {
		if got := Escape(c.in); got != c.escaped {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.escaped)
		}
		if got := Name(c.in); got != c.name {
			t.Errorf("Name(%q) = %q, want %q", c.in, got, c.name)
		}
	}
}
