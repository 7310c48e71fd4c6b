package tlpcodec

import (
	"bufio"
	"errors"
	"io"
)

// lineReader reads input line by line with each line bounded: a longer
// one is reported (tooLong) and skipped to its end without being held,
// so one over-long line costs neither memory nor the lines after it.
// (bufio.Scanner stopped the whole input at it: "token too long".)
type lineReader struct {
	br   *bufio.Reader
	max  int
	buf  []byte
	line int // number of the line last returned, from 1
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next line without its line ending, or tooLong for a
// line over max bytes; err is io.EOF after the last line.
func (l *lineReader) next() (text []byte, tooLong bool, err error) {
	l.buf = l.buf[:0]
	for {
		chunk, err := l.br.ReadSlice('\n')
		if !tooLong {
			if len(l.buf)+len(chunk) > l.max+2 { // room for "\r\n"
				tooLong, l.buf = true, l.buf[:0]
			} else {
				l.buf = append(l.buf, chunk...)
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && (len(l.buf) > 0 || tooLong):
			// A last line without a newline.
		case err != nil:
			return nil, false, err
		}
		l.line++
		if tooLong {
			return nil, true, nil
		}
		text = l.buf
		if n := len(text); n > 0 && text[n-1] == '\n' {
			text = text[:n-1]
		}
		if n := len(text); n > 0 && text[n-1] == '\r' {
			text = text[:n-1]
		}
		if len(text) > l.max {
			return nil, true, nil
		}
		return text, false, nil
	}
}
