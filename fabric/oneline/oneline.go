// Package oneline cuts text that came from elsewhere (an error body a
// manager, an agent or a proxy sent, an ID or a path a request named) to
// one bounded line of an error message. The manager's API, its agent
// client and the ctl client share it, so that what one side bounds the
// other does not have to guess at. Escape and Name keep the user's own
// input whole instead, written so that it stays on one line: dxpu's final
// error line, and the file names of refusals (secretfile).
package oneline

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Cut is s as one line of at most n bytes of its text: each run of white
// space and control characters (line breaks, tabs, escapes, U+2028) is one
// space, leading and trailing ones are dropped, and invalid UTF-8 reads as
// U+FFFD. Where that text is longer than n bytes, Cut is its first whole
// runes that fit in n bytes followed by "... (L bytes)", L the length of s,
// so Cut's result is at most n + MaxSuffix bytes. The result is valid
// UTF-8 with no control characters, whatever s holds; n <= 0 keeps none
// of the text, only the suffix (or "" for an s that is all white space).
func Cut(s string, n int) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			space = b.Len() > 0
			continue
		}
		need := utf8.RuneLen(r) // U+FFFD for an invalid byte: 3
		if space {
			need++
		}
		if b.Len()+need > n {
			return b.String() + "... (" + strconv.Itoa(len(s)) + " bytes)"
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// MaxSuffix bounds what Cut adds to the n bytes of text it keeps: "... ("
// and " bytes)" around the length of a string (at most 19 digits).
const MaxSuffix = len("... (") + 19 + len(" bytes)")
