package tlpcodec

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/app/jsonfile"
	"github.com/dxpu/dxpu/internal/strictjson"
	"github.com/dxpu/dxpu/tlp"
)

// maxEncodeLine bounds a JSON line: 4 MiB holds the largest TLP many
// times over.
const maxEncodeLine = 4 << 20

// Encode reads JSON objects in Decode's format, one per line, from stdin
// and prints each TLP as a hex line to stdout. Lines that do not encode are
// reported on stderr with their number and make the error
// apperr.ErrFailed; I/O errors are plain.
func Encode(stdin io.Reader, stdout, stderr io.Writer) error {
	w := bufio.NewWriterSize(stdout, 64<<10)
	lr := newLineReader(stdin, maxEncodeLine)
	var (
		buf, hx         []byte
		total, failures int
		err             error
	)
	for {
		text, tooLong, rerr := lr.next()
		if rerr != nil {
			if rerr != io.EOF {
				err = rerr
			}
			break
		}
		line := lr.line
		if tooLong {
			total++
			failures++
			fmt.Fprintf(stderr, "dxpu tlp encode: line %d: longer than %d bytes: skipped\n", line, maxEncodeLine)
			continue
		}
		s := strings.TrimSpace(string(text))
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		total++
		js := []byte(s)
		out, rjs, handled, err := encodeReserved(buf[:0], s)
		switch {
		case !handled:
			out, err = tlp.EncodeJSON(buf[:0], js)
		case rjs != nil:
			js = rjs // what package tlp read, for its errors' columns
		}
		buf = out
		if err != nil {
			failures++
			var ce *colError
			if errors.As(err, &ce) {
				fmt.Fprintf(stderr, "dxpu tlp encode: line %d col %d: %v\n", line, ce.col, ce.err)
				continue
			}
			var ke *strictjson.KeyError
			if errors.As(err, &ke) {
				fmt.Fprintf(stderr, "dxpu tlp encode: line %d col %d: %v\n", line, ke.Offset+1, ke)
				continue
			}
			// encoding/json's own errors name Go types (tlp.jsonPacket,
			// uint16): say instead where and what JSON was expected.
			if e, ok := jsonfile.Explain(err, js, nil); ok {
				fmt.Fprintf(stderr, "dxpu tlp encode: line %d col %d: %s\n", line, e.Col, e.Msg)
				continue
			}
			fmt.Fprintf(stderr, "dxpu tlp encode: line %d: %v\n", line, err)
			continue
		}
		hx = hex.AppendEncode(hx[:0], buf)
		hx = append(hx, '\n')
		w.Write(hx)
	}
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	if failures > 0 {
		return apperr.Failed(fmt.Errorf("tlp encode: %d of %d lines did not encode", failures, total))
	}
	return nil
}
