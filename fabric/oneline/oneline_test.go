package oneline

import (
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"", 10, ""},
		{"not found", 64, "not found"},
		{"  two\r\n\tlines \n", 64, "two lines"},
		{"<html>\n<body>502 Bad Gateway</body>\n</html>\n", 200, "<html> <body>502 Bad Gateway</body> </html>"},
		{"a\x1b[31mred\x00b", 64, "a [31mred b"},           // escapes and NULs are not written to a terminal
		{"a\u2028b\u0085c", 64, "a b c"},                   // Unicode line and next-line separators too
		{"bad \xff\xfe byte", 64, "bad \ufffd\ufffd byte"}, // invalid UTF-8 as U+FFFD
		{"abcdef", 6, "abcdef"},
		{"abcdefg", 6, "abcdef... (7 bytes)"},
		// The text kept is n bytes at most, a space it would end on included.
		{"abc defg", 4, "abc... (8 bytes)"},
		{"abc defg", 5, "abc d... (8 bytes)"},
		// A rune is kept whole or not at all.
		{"ab\u00e9c", 3, "ab... (5 bytes)"},
		{"ab\u00e9c", 4, "ab\u00e9... (5 bytes)"},
		{"ab\xffc", 4, "ab... (4 bytes)"}, // U+FFFD takes 3 bytes, not the 1 it replaces
		{"x", 0, "... (1 bytes)"},
		{"x", -5, "... (1 bytes)"},
		{" \n\t", 0, ""},
	} {
		if got := Cut(tc.s, tc.n); got != tc.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

// TestCutBounds: a 1 MiB line-broken body, the case that made the
// callers cut (a proxy's page repeated whole in a one-line error), comes
// back as one line of at most n + MaxSuffix bytes, naming its length.
func TestCutBounds(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("<p>upstream\r\nunavailable</p>\n", 1<<15)
	got := Cut(body, 200)
	if len(got) > 200+MaxSuffix || strings.ContainsAny(got, "\r\n") || !strings.HasSuffix(got, "... (950272 bytes)") {
		t.Fatalf("Cut of a %d-byte body: %d bytes %q", len(body), len(got), got)
	}
	if MaxSuffix != len("... (9223372036854775807 bytes)") {
		t.Fatalf("MaxSuffix %d does not hold the longest length", MaxSuffix)
	}
}

// FuzzCut: whatever the text and bound, Cut is one line (no control or
// white space character but the single spaces between words, none at
// either end) of valid UTF-8, at most n bytes of text plus MaxSuffix; it
// keeps the valid UTF-8 of s (where s is valid and fits, the words of s
// themselves), and a result under the bound is s's words, not a cut.
func FuzzCut(f *testing.F) {
	for _, s := range []string{"", "ok", "  two\r\nlines ", "a\x1b[2Jb", "bad \xff byte", "ab\u00e9c", "\u2028\u2029", "<html>\n</html>"} {
		f.Add(s, 4)
		f.Add(s, 200)
	}
	f.Add("abc defg", 4)
	f.Add("x", -1)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n %= 1 << 16
		got := Cut(s, n)
		if !utf8.ValidString(got) {
			t.Fatalf("Cut(%q, %d) = %q: not valid UTF-8", s, n, got)
		}
		if len(got) > max(n, 0)+MaxSuffix {
			t.Fatalf("Cut(%q, %d) = %d bytes, want at most %d", s, n, len(got), max(n, 0)+MaxSuffix)
		}
		for i, r := range got {
			if r != ' ' && (unicode.IsSpace(r) || unicode.IsControl(r)) {
				t.Fatalf("Cut(%q, %d) = %q: %U at byte %d", s, n, got, r, i)
			}
		}
		if strings.HasPrefix(got, " ") || strings.HasSuffix(got, " ") || strings.Contains(got, "  ") {
			t.Fatalf("Cut(%q, %d) = %q: spaces not single, or at an end", s, n, got)
		}
		// The words of s, each invalid byte as U+FFFD.
		var valid strings.Builder
		for _, r := range s {
			valid.WriteRune(r)
		}
		words := strings.Join(strings.FieldsFunc(valid.String(), func(r rune) bool {
			return unicode.IsSpace(r) || unicode.IsControl(r)
		}), " ")
		if got == words {
			return
		}
		kept, cut := strings.CutSuffix(got, "... ("+strconv.Itoa(len(s))+" bytes)")
		if !cut || !strings.HasPrefix(words, kept) || strings.HasSuffix(kept, " ") || len(kept) > max(n, 0) {
			t.Fatalf("Cut(%q, %d) = %q: neither the words %q nor a prefix of them and the length %d", s, n, got, words, len(s))
		}
		// The longest such prefix: the next rune (after its space) does not fit.
		next := words[len(kept):]
		need := 0
		if next[0] == ' ' {
			need, next = 1, next[1:]
		}
		_, size := utf8.DecodeRuneInString(next)
		if len(kept)+need+size <= n {
			t.Fatalf("Cut(%q, %d) = %q: the next %q of the words %q fits too", s, n, got, next[:size], words)
		}
	})
}
