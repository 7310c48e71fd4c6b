package secretfile

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ShowPath is path as an error message names it: as given when every
// character prints, else Go-quoted, so that a name holding a newline, a
// carriage return or an escape sequence (a file name may hold any byte
// but '/' and NUL) still gives a message of one line that shows what
// was given.
func ShowPath(path string) string {
	if path != "" && utf8.ValidString(path) && strings.IndexFunc(path, func(r rune) bool { return !unicode.IsPrint(r) }) < 0 {
		return path
	}
	return strconv.Quote(path)
}
