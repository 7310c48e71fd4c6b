package trace

import (
	"errors"
	"io"
	"unicode/utf8"
)

// scanner is a streaming, validating JSON tokenizer over an io.Reader. It
// keeps a fixed window of input (bufSize bytes) and a few bounded scratch
// buffers, so memory does not grow with the size of the trace. Every value it
// reads or skips is checked against the JSON grammar (RFC 8259); errors carry
// the byte offset where the input stopped making sense.
//
// It exists because encoding/json's Decoder, even with a no-op Unmarshaler
// per event, frames only 0.56 to 0.83 million trace events per second on
// this project's traces, below the model's ingestion target; this scanner
// does one pass, allocates nothing per event, and is cross-checked against
// encoding/json in the fuzz target.
type scanner struct {
	r    io.Reader
	buf  []byte
	pos  int   // next unread byte in buf
	end  int   // bytes of buf holding data
	base int64 // stream offset of buf[0]
	rerr error // sticky read error (io.EOF at the end)

	num    []byte // the current number literal (in buf or numBuf)
	numBuf []byte // scratch for numbers that straddle a refill
	junk   []byte // scratch for escapes in skipped strings
}

const (
	bufSize = 64 << 10
	// maxScratch bounds the bytes kept from one string or number; longer
	// ones are still validated in full but kept truncated (strings) or
	// rejected (numbers, which no trace writes that long).
	maxScratch = 4 << 10
	// maxDepth bounds nesting inside one event so hostile input cannot
	// make the skipper recurse without limit.
	maxDepth = 512
)

func newScanner(r io.Reader) *scanner {
	return &scanner{r: r, buf: make([]byte, bufSize), numBuf: make([]byte, 0, 64)}
}

// offset is the stream offset of the next unread byte.
func (s *scanner) offset() int64 { return s.base + int64(s.pos) }

// fill makes at least one unread byte available; false at end of input or
// on a read error (kept in s.rerr).
func (s *scanner) fill() bool {
	if s.pos < s.end {
		return true
	}
	if s.rerr != nil {
		return false
	}
	s.base += int64(s.end)
	s.pos, s.end = 0, 0
	for s.end == 0 {
		n, err := s.r.Read(s.buf)
		s.end = n
		if err != nil {
			s.rerr = err
			return n > 0
		}
		if n == 0 {
			// A reader that returns 0, nil forever would hang us; treat
			// a long run of them as an error.
			s.rerr = io.ErrNoProgress
			return false
		}
	}
	return true
}

// errAt returns a syntax error at the current offset; at end of input it
// reports truncation, and a read error is passed on.
func (s *scanner) errAt(msg string) error {
	if s.pos >= s.end && s.rerr != nil {
		if errors.Is(s.rerr, io.EOF) || errors.Is(s.rerr, io.ErrUnexpectedEOF) {
			return &SyntaxError{Offset: s.offset(), Msg: "unexpected end of input (truncated trace?) " + msg, Err: io.ErrUnexpectedEOF}
		}
		return &SyntaxError{Offset: s.offset(), Msg: "read failed " + msg, Err: s.rerr}
	}
	return &SyntaxError{Offset: s.offset(), Msg: msg}
}

// skipWS advances over JSON whitespace and returns the next byte without
// consuming it; ok is false at end of input.
func (s *scanner) skipWS() (byte, bool) {
	if s.pos < s.end {
		if c := s.buf[s.pos]; c > ' ' {
			return c, true
		}
	}
	for {
		if s.pos >= s.end && !s.fill() {
			return 0, false
		}
		for s.pos < s.end {
			c := s.buf[s.pos]
			if c != ' ' && c != '\n' && c != '\r' && c != '\t' {
				return c, true
			}
			s.pos++
		}
	}
}

// next returns the next non-space byte and consumes it.
func (s *scanner) next(ctx string) (byte, error) {
	c, ok := s.skipWS()
	if !ok {
		return 0, s.errAt(ctx)
	}
	s.pos++
	return c, nil
}

// plainByte marks the bytes a string can hold without further thought:
// not a quote, a backslash or a control character.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// readStringRef reads a string (opening quote consumed) and returns its
// bytes: a view into the buffer, valid until the next read, when the string
// is plain and fully buffered; otherwise it is unescaped into dst.
func (s *scanner) readStringRef(dst []byte) ([]byte, error) {
	b := s.buf[s.pos:s.end]
	for i, c := range b {
		if !plainByte[c] {
			if c == '"' {
				s.pos += i + 1
				if i > maxScratch {
					i = maxScratch
				}
				return b[:i], nil
			}
			break
		}
	}
	return s.readString(dst)
}

// readString reads a JSON string whose opening quote has been consumed.
// It appends the unescaped bytes to dst, keeping at most maxScratch of them
// (the rest is validated and dropped), and returns the extended slice.
func (s *scanner) readString(dst []byte) ([]byte, error) {
	for {
		if s.pos >= s.end && !s.fill() {
			return dst, s.errAt("in string")
		}
		// Fast path: run of plain bytes.
		start := s.pos
		for s.pos < s.end && plainByte[s.buf[s.pos]] {
			s.pos++
		}
		dst = appendCapped(dst, s.buf[start:s.pos])
		if s.pos >= s.end {
			continue
		}
		c := s.buf[s.pos]
		switch {
		case c == '"':
			s.pos++
			return dst, nil
		case c == '\\':
			s.pos++
			var err error
			if dst, err = s.readEscape(dst); err != nil {
				return dst, err
			}
		default:
			return dst, s.errAt("control character in string")
		}
	}
}

func appendCapped(dst, b []byte) []byte {
	if room := maxScratch - len(dst); room < len(b) {
		if room <= 0 {
			return dst
		}
		b = b[:room]
	}
	return append(dst, b...)
}

func (s *scanner) readEscape(dst []byte) ([]byte, error) {
	if s.pos >= s.end && !s.fill() {
		return dst, s.errAt("in string escape")
	}
	c := s.buf[s.pos]
	s.pos++
	switch c {
	case '"', '\\', '/':
		return appendCapped(dst, []byte{c}), nil
	case 'b':
		return appendCapped(dst, []byte{'\b'}), nil
	case 'f':
		return appendCapped(dst, []byte{'\f'}), nil
	case 'n':
		return appendCapped(dst, []byte{'\n'}), nil
	case 'r':
		return appendCapped(dst, []byte{'\r'}), nil
	case 't':
		return appendCapped(dst, []byte{'\t'}), nil
	case 'u':
		r, err := s.readHex4()
		if err != nil {
			return dst, err
		}
		if r >= 0xD800 && r < 0xDC00 {
			// High surrogate: a low one should follow; if not, the
			// rune is invalid but the JSON still is.
			if s.pos+1 >= s.end {
				s.fillAtLeast(2)
			}
			if s.end-s.pos >= 2 && s.buf[s.pos] == '\\' && s.buf[s.pos+1] == 'u' {
				s.pos += 2
				lo, err := s.readHex4()
				if err != nil {
					return dst, err
				}
				if lo >= 0xDC00 && lo < 0xE000 {
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				} else {
					dst = appendCapped(dst, utf8.AppendRune(nil, utf8.RuneError))
					r = lo
				}
			} else {
				r = utf8.RuneError
			}
		}
		var tmp [4]byte
		n := utf8.EncodeRune(tmp[:], rune(r))
		return appendCapped(dst, tmp[:n]), nil
	default:
		s.pos--
		return dst, s.errAt("invalid escape in string")
	}
}

// fillAtLeast tries to have n unread bytes buffered (n is small).
func (s *scanner) fillAtLeast(n int) {
	for s.end-s.pos < n && s.rerr == nil {
		if s.pos > 0 {
			copy(s.buf, s.buf[s.pos:s.end])
			s.base += int64(s.pos)
			s.end -= s.pos
			s.pos = 0
		}
		m, err := s.r.Read(s.buf[s.end:])
		s.end += m
		if err != nil {
			s.rerr = err
		} else if m == 0 {
			s.rerr = io.ErrNoProgress
		}
	}
}

func (s *scanner) readHex4() (uint32, error) {
	var r uint32
	for i := 0; i < 4; i++ {
		if s.pos >= s.end && !s.fill() {
			return 0, s.errAt("in \\u escape")
		}
		c := s.buf[s.pos]
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v = c - 'A' + 10
		default:
			return 0, s.errAt("invalid hex digit in \\u escape")
		}
		s.pos++
		r = r<<4 | uint32(v)
	}
	return r, nil
}

// readNumber reads a JSON number whose first byte is next in the input and
// leaves its literal in s.num.
func (s *scanner) readNumber() error {
	if s.fastNumber() {
		return nil
	}
	s.num = s.numBuf[:0]
	// States: 0 start, 1 after '-', 2 leading zero, 3 int digits,
	// 4 after '.', 5 frac digits, 6 after 'e', 7 after exp sign, 8 exp digits.
	state := 0
	for {
		if s.pos >= s.end && !s.fill() {
			break
		}
		c := s.buf[s.pos]
		ok := false
		switch state {
		case 0:
			if c == '-' {
				state, ok = 1, true
			} else if c == '0' {
				state, ok = 2, true
			} else if c >= '1' && c <= '9' {
				state, ok = 3, true
			}
		case 1:
			if c == '0' {
				state, ok = 2, true
			} else if c >= '1' && c <= '9' {
				state, ok = 3, true
			}
		case 2, 3:
			if state == 3 && c >= '0' && c <= '9' {
				ok = true
			} else if c == '.' {
				state, ok = 4, true
			} else if c == 'e' || c == 'E' {
				state, ok = 6, true
			}
		case 4, 5:
			if c >= '0' && c <= '9' {
				state, ok = 5, true
			} else if state == 5 && (c == 'e' || c == 'E') {
				state, ok = 6, true
			}
		case 6:
			if c == '+' || c == '-' {
				state, ok = 7, true
			} else if c >= '0' && c <= '9' {
				state, ok = 8, true
			}
		case 7, 8:
			if c >= '0' && c <= '9' {
				state, ok = 8, true
			}
		}
		if !ok {
			break
		}
		if len(s.num) >= maxScratch {
			return s.errAt("number literal too long")
		}
		s.num = append(s.num, c)
		s.pos++
	}
	s.numBuf = s.num[:0]
	switch state {
	case 2, 3, 5, 8:
		return nil
	}
	if s.pos >= s.end && s.rerr != nil {
		return s.errAt("in number")
	}
	return s.errAt("malformed number")
}

// fastNumber handles the common case of a plain number that ends inside the
// buffer: s.num then points into the buffer (valid until the next read).
// It returns false, consuming nothing, when the slow path must decide.
func (s *scanner) fastNumber() bool {
	b := s.buf[s.pos:s.end]
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	d := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == d || (b[d] == '0' && i-d > 1) {
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		f := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == f {
			return false
		}
	}
	if i >= len(b) || b[i] == 'e' || b[i] == 'E' || i > maxScratch {
		return false // may continue past the buffer, or has an exponent
	}
	s.num = b[:i]
	s.pos += i
	return true
}

// readLiteral consumes the rest of true, false or null after its first byte.
func (s *scanner) readLiteral(rest string) error {
	for i := 0; i < len(rest); i++ {
		if s.pos >= s.end && !s.fill() {
			return s.errAt("in literal")
		}
		if s.buf[s.pos] != rest[i] {
			return s.errAt("invalid literal")
		}
		s.pos++
	}
	return nil
}

// skipValue validates and discards one JSON value (any type), iteratively so
// that deep nesting cannot exhaust the stack.
func (s *scanner) skipValue() error {
	// stack holds '{' or '[' per open container; expectKey marks objects
	// awaiting a key.
	var stackArr [32]byte
	stack := stackArr[:0]
	for {
		c, err := s.next("where a value was expected")
		if err != nil {
			return err
		}
		switch {
		case c == '{':
			if len(stack) >= maxDepth {
				return s.errAt("nesting too deep")
			}
			c2, ok := s.skipWS()
			if ok && c2 == '}' {
				s.pos++
				break
			}
			stack = append(stack, '{')
			if err := s.skipKey(); err != nil {
				return err
			}
			continue
		case c == '[':
			if len(stack) >= maxDepth {
				return s.errAt("nesting too deep")
			}
			c2, ok := s.skipWS()
			if ok && c2 == ']' {
				s.pos++
				break
			}
			stack = append(stack, '[')
			continue
		case c == '"':
			if err := s.skipString(); err != nil {
				return err
			}
		case c == '-' || (c >= '0' && c <= '9'):
			s.pos--
			if err := s.readNumber(); err != nil {
				return err
			}
		case c == 't':
			if err := s.readLiteral("rue"); err != nil {
				return err
			}
		case c == 'f':
			if err := s.readLiteral("alse"); err != nil {
				return err
			}
		case c == 'n':
			if err := s.readLiteral("ull"); err != nil {
				return err
			}
		default:
			s.pos--
			return s.errAt("invalid character where a value was expected")
		}
		// A value is complete: close containers or move to the next element.
		for {
			if len(stack) == 0 {
				return nil
			}
			c, err := s.next("after a value in a container")
			if err != nil {
				return err
			}
			top := stack[len(stack)-1]
			if c == ',' {
				if top == '{' {
					if err := s.skipKey(); err != nil {
						return err
					}
				}
				break
			}
			if (top == '{' && c == '}') || (top == '[' && c == ']') {
				stack = stack[:len(stack)-1]
				continue
			}
			s.pos--
			return s.errAt("expected ',' or end of container")
		}
	}
}

// skipKey consumes `"key" :` inside an object.
func (s *scanner) skipKey() error {
	c, err := s.next("where an object key was expected")
	if err != nil {
		return err
	}
	if c != '"' {
		s.pos--
		return s.errAt("object key must be a string")
	}
	if err := s.skipString(); err != nil {
		return err
	}
	return s.colon()
}

// colon consumes the ':' after an object key.
func (s *scanner) colon() error {
	c, err := s.next("where ':' was expected")
	if err != nil {
		return err
	}
	if c != ':' {
		s.pos--
		return s.errAt("expected ':' after object key")
	}
	return nil
}

// endOrComma consumes what follows a member of an object or array: true at
// its closing byte, false after a ','. after names the place for a
// truncation, where for any other byte.
func (s *scanner) endOrComma(closing byte, after, where string) (bool, error) {
	c, err := s.next(after)
	if err != nil {
		return false, err
	}
	switch c {
	case closing:
		return true, nil
	case ',':
		return false, nil
	}
	s.pos--
	return false, s.errAt("expected ',' or '" + string(closing) + "' " + where)
}

// skipString validates a string (opening quote consumed) without keeping it.
func (s *scanner) skipString() error {
	for {
		if s.pos >= s.end && !s.fill() {
			return s.errAt("in string")
		}
		for s.pos < s.end && plainByte[s.buf[s.pos]] {
			s.pos++
		}
		if s.pos >= s.end {
			continue
		}
		c := s.buf[s.pos]
		switch {
		case c == '"':
			s.pos++
			return nil
		case c == '\\':
			s.pos++
			var err error
			if s.junk, err = s.readEscape(s.junk[:0]); err != nil {
				return err
			}
		default:
			return s.errAt("control character in string")
		}
	}
}
