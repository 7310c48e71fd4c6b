package oneline

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// printable: valid UTF-8 whose every rune prints (a space does; a tab, a
// line break, an escape or U+2028 does not).
func printable(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// Escape is s with every rune that does not print written as its Go
// escape (\n, \r, \x1b, \u2028) and every byte that is not UTF-8 as \xNN:
// one line that shows exactly what s held, for a message the user's own
// input (a file name, an operand) went into. Unlike Cut it drops and
// bounds nothing.
func Escape(s string) string {
	if printable(s) {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x` + strconv.FormatUint(uint64(s[0])|0x100, 16)[1:])
		case unicode.IsPrint(r):
			b.WriteString(s[:n])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		s = s[n:]
	}
	return b.String()
}

// Name is a name (a file's path, a flag's value) as an error message
// shows it: as given when every character prints, else Go-quoted, so that
// a name holding a newline, a carriage return or an escape sequence (a
// file name may hold any byte but '/' and NUL) still gives a message of
// one line that shows what was given. The empty name is "".
func Name(s string) string {
	if s != "" && printable(s) {
		return s
	}
	return strconv.Quote(s)
}
