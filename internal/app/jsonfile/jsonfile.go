// Package jsonfile reads the JSON files commands are given (a box, a
// host) strictly: unknown fields are refused, and the error lists the
// fields the type does accept, as dotted paths (gpus[].memory_mib).
// encoding/json's errors name Go types (pool.Box, uint64) and carry a byte
// offset; Explain turns them into "line L col C: field F: expected ...,
// found ..." in the words of the JSON a user wrote.
package jsonfile

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"

	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/strictjson"
)

// MaxSize bounds a file Read accepts: a box or host is a few KiB.
const MaxSize = 16 << 20

// Fields lists the JSON field paths a value of type t accepts, nested
// with dots and [] for lists: bridge.switch_port, gpus[].memory_mib.
func Fields(t reflect.Type) []string {
	var out []string
	var walk func(prefix string, t reflect.Type)
	walk = func(prefix string, t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			ft := f.Type
			suffix := ""
			if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
				ft, suffix = ft.Elem(), "[]"
			}
			if ft.Kind() == reflect.Struct && !isText(ft) {
				walk(prefix+name+suffix+".", ft)
				continue
			}
			out = append(out, prefix+name)
		}
	}
	walk("", t)
	return out
}

// topFields lists the JSON names of t's own fields (not nested).
func topFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}

var (
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	rawMessage      = reflect.TypeFor[json.RawMessage]()
)

func isText(t reflect.Type) bool { return reflect.PointerTo(t).Implements(textUnmarshaler) }

// Expect says in JSON's words what a value of type t is: "an object with
// fields id, bridge, ...", "an array", "a whole number from 0 to 65535".
func Expect(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == rawMessage || t.Kind() == reflect.Interface:
		return "any JSON value"
	case isText(t):
		return "a string"
	case reflect.PointerTo(t).Implements(jsonUnmarshaler) && t.Kind() != reflect.Struct:
		return "a JSON value of its own form"
	}
	switch t.Kind() {
	case reflect.Struct:
		return "an object with fields " + strings.Join(topFields(t), ", ")
	case reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array of " + plural(Expect(t.Elem()))
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64:
		return "a whole number"
	case reflect.Int8, reflect.Int16, reflect.Int32:
		b := t.Bits()
		return fmt.Sprintf("a whole number from %d to %d", -(int64(1) << (b - 1)), int64(1)<<(b-1)-1)
	case reflect.Uint, reflect.Uint64, reflect.Uintptr:
		return "a whole number >= 0"
	case reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return fmt.Sprintf("a whole number from 0 to %d", uint64(1)<<t.Bits()-1)
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a JSON value"
}

// plural turns "an object with fields a, b" into "objects with fields a, b".
func plural(s string) string {
	for _, w := range []struct{ one, many string }{
		{"an object", "objects"}, {"a string", "strings"}, {"a whole number", "whole numbers"},
		{"a number", "numbers"}, {"an array", "arrays"}, {"a base64 string", "base64 strings"},
	} {
		if rest, ok := strings.CutPrefix(s, w.one); ok {
			return w.many + rest
		}
	}
	return s
}

// found says in JSON's words what encoding/json's UnmarshalTypeError.Value
// ("array", "number -1", "bool") was.
func found(v string) string {
	switch v {
	case "array", "object":
		return "an " + v
	case "string", "number":
		return "a " + v
	case "bool":
		return "true or false"
	}
	if n, ok := strings.CutPrefix(v, "number "); ok {
		return "the number " + n
	}
	return v
}

// Error is a JSON input error at a place in the text: line and column
// count from 1 (the column in bytes).
type Error struct {
	Line, Col int
	Msg       string
	err       error
}

func (e *Error) Error() string { return fmt.Sprintf("line %d col %d: %s", e.Line, e.Col, e.Msg) }
func (e *Error) Unwrap() error { return e.err }

// position turns a byte offset into data into a line and column.
func position(data []byte, off int64) (line, col int) {
	off = max(0, min(off, int64(len(data))))
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	return line, int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
}

// valueStart backs up from just past a value (where encoding/json's type
// errors point) to its first byte; for an object or array, whose error
// points just past the bracket, to the bracket.
func valueStart(data []byte, end int64, value string) int64 {
	end = max(0, min(end, int64(len(data))))
	if value == "object" || value == "array" {
		return max(0, end-1)
	}
	i := end
	if i > 0 && data[i-1] == '"' { // a string: back to its opening quote
		for i--; i > 0; i-- {
			if data[i-1] == '"' && (i < 2 || data[i-2] != '\\') {
				return i - 1
			}
		}
		return 0
	}
	for i > 0 && strings.IndexByte("+-.0123456789eEaflnrstu", data[i-1]) >= 0 {
		i--
	}
	return i
}

// fieldPath writes encoding/json's dotted field path (gpus.memory_mib) as
// Fields does, with [] after lists of objects (gpus[].memory_mib), walking
// root when known.
func fieldPath(root reflect.Type, path string) string {
	if root == nil {
		return path
	}
	t := root
	var out []string
	names := strings.Split(path, ".")
	for i, name := range names {
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		var next reflect.Type
		if t != nil && t.Kind() == reflect.Struct {
			for j := range t.NumField() {
				f := t.Field(j)
				n, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if n == "" {
					n = f.Name
				}
				if n == name {
					next = f.Type
					break
				}
			}
		}
		if next != nil && (next.Kind() == reflect.Slice || next.Kind() == reflect.Array) && next.Elem().Kind() == reflect.Struct && i < len(names)-1 {
			name += "[]"
			next = next.Elem()
		}
		out = append(out, name)
		t = next
	}
	return strings.Join(out, ".")
}

// Explain turns an error of encoding/json from decoding data into a value
// of type root (nil: unknown) into an *Error at a line and column, in
// JSON's words rather than Go's. Other errors come back as they are, and
// ok is false.
func Explain(err error, data []byte, root reflect.Type) (e *Error, ok bool) {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		line, col := position(data, valueStart(data, te.Offset, te.Value))
		msg := fmt.Sprintf("expected %s, found %s", Expect(te.Type), found(te.Value))
		if te.Field != "" {
			msg = "field " + fieldPath(root, te.Field) + ": " + msg
		}
		return &Error{line, col, msg, err}, true
	case errors.As(err, &se):
		line, col := position(data, se.Offset-1)
		return &Error{line, col, strings.TrimPrefix(se.Error(), "json: "), err}, true
	case errors.Is(err, io.ErrUnexpectedEOF):
		line, col := position(data, int64(len(bytes.TrimRight(data, " \t\r\n"))))
		return &Error{line, col, "the JSON ends before its value is complete", err}, true
	}
	// DisallowUnknownFields: `json: unknown field "x"`, with no offset;
	// the field's first appearance as a key is where it is.
	if _, name, ok := strings.Cut(err.Error(), "json: unknown field "); ok {
		off := int64(0)
		if i := keyIndex(data, strings.Trim(name, `"`)); i >= 0 {
			off = int64(i)
		}
		line, col := position(data, off)
		msg := "unknown field " + name
		if root != nil {
			msg += "; valid fields: " + strings.Join(Fields(root), ", ")
		}
		return &Error{line, col, msg, err}, true
	}
	return nil, false
}

// keyIndex finds "name" used as a key in data: followed by a colon.
func keyIndex(data []byte, name string) int {
	q := []byte(`"` + name + `"`)
	for from := 0; ; {
		i := bytes.Index(data[from:], q)
		if i < 0 {
			return -1
		}
		i += from
		rest := bytes.TrimLeft(data[i+len(q):], " \t\r\n")
		if len(rest) > 0 && rest[0] == ':' {
			return i
		}
		from = i + 1
	}
}

// Decode decodes data, the contents of the file name, into a T: strictly
// (no unknown fields, nothing after the value), with errors that name the
// file, the line and column, and what was expected, and no Go type. A T
// with a Validate method must pass it. Its errors are apperr.ErrUsage.
func Decode[T any](name string, data []byte) (T, error) {
	var v T
	t := reflect.TypeFor[T]()
	if len(bytes.TrimSpace(data)) == 0 {
		return v, apperr.Usage(fmt.Errorf("%s is empty: expected %s", name, Expect(t)))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(&v)
	if err == nil {
		end := dec.InputOffset()
		if _, terr := dec.Token(); terr != io.EOF {
			line, col := position(data, skipSpace(data, end))
			err = &Error{line, col, "unexpected data after the JSON value (the file holds one value)", nil}
		}
	}
	if err == nil {
		// What encoding/json lets pass: a key given twice (the last
		// wins) or spelled in another case than its field.
		var ke *strictjson.KeyError
		if errors.As(strictjson.Check(data, t, false), &ke) {
			line, col := position(data, ke.Offset)
			err = &Error{line, col, ke.Error(), ke}
		}
	}
	if err != nil {
		if e, ok := Explain(err, data, t); ok {
			err = e
		}
		return v, apperr.Usage(fmt.Errorf("%s: %w", name, err))
	}
	if val, ok := any(v).(interface{ Validate() error }); ok {
		if err := val.Validate(); err != nil {
			return v, apperr.Usage(fmt.Errorf("%s: %w", name, err))
		}
	}
	return v, nil
}

func skipSpace(data []byte, off int64) int64 {
	for off < int64(len(data)) && strings.IndexByte(" \t\r\n", data[off]) >= 0 {
		off++
	}
	return off
}

// Read decodes a T from the file path ("-": stdin) as Decode does; its
// errors are apperr.ErrUsage.
func Read[T any](stdin io.Reader, path string) (T, error) {
	v, _, err := ReadData[T](stdin, path)
	return v, err
}

// ReadData is Read that also returns the bytes read, for a command that
// sends the file as the user wrote it (so that a strict API judges it,
// not a re-encoding of v).
func ReadData[T any](stdin io.Reader, path string) (T, []byte, error) {
	var v T
	r, name := stdin, "stdin"
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return v, nil, apperr.Usage(err)
		}
		defer f.Close()
		r, name = f, path
	}
	data, err := io.ReadAll(io.LimitReader(r, MaxSize+1))
	if err != nil {
		return v, nil, apperr.Usage(fmt.Errorf("%s: %w", name, err))
	}
	if len(data) > MaxSize {
		return v, nil, apperr.Usage(fmt.Errorf("%s is larger than %d MiB; expected %s", name, MaxSize>>20, Expect(reflect.TypeFor[T]())))
	}
	v, err = Decode[T](name, data)
	return v, data, err
}

// ExplainFile rewrites err, an error of a lower package's decoding of the
// JSON file path (one that cannot import this one: fabric's table file),
// as Explain does, reading the file again for the line and column; what
// says what the file holds, for an empty one. Errors without encoding/json
// in their chain come back as they are.
func ExplainFile(err error, path, what string) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	if err == nil || !(errors.As(err, &te) || errors.As(err, &se) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "json: unknown field ")) {
		return err
	}
	f, oerr := os.Open(path)
	if oerr != nil {
		return err
	}
	defer f.Close()
	data, rerr := io.ReadAll(io.LimitReader(f, MaxSize))
	if rerr != nil {
		return err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return &explained{fmt.Sprintf("%s is empty: expected %s", path, what), err}
	}
	if e, ok := Explain(err, data, nil); ok {
		return &explained{path + ": " + e.Error(), err}
	}
	return err
}

// explained is a message that replaces its cause's text but keeps it in
// the chain for errors.Is and As.
type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }
