package main

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// oneLine is an error message as run prints it: one line whatever the
// input it quotes held. A newline, a carriage return, a terminal escape or
// a byte that is not UTF-8 (from a file name, an operand, a peer's answer)
// is written as its Go escape (\n, \x1b, \xe9), so that the message
// neither splits into lines that look like the next message nor drives
// the terminal.
func oneLine(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			clean = false
			break
		}
	}
	if clean {
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
			q := strconv.QuoteRune(r) // '\n', '\x1b', '\u2028'
			b.WriteString(q[1 : len(q)-1])
		}
		s = s[n:]
	}
	return b.String()
}
