// Package strictjson checks what encoding/json lets pass: a key given
// twice in one object (it keeps the last), a key spelled in another case
// than the field it fills (it matches regardless of case), and data
// after the value (Decoder.Decode stops at the value's end). The manager's
// API, the command line's JSON files, package tlp's JSON TLPs and the
// model's fabric profiles all judge their input by it, so one document is
// either accepted or refused everywhere, for the same reason. It sits at
// the ground, as sim does: every layer may import it.
package strictjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
)

// What a KeyError found.
var (
	ErrDuplicate = errors.New("duplicate field")
	ErrCase      = errors.New("field names are case-sensitive")
	ErrUnknown   = errors.New("unknown field")
	ErrDepth     = errors.New("JSON nested too deep")
	ErrTrailing  = errors.New("data after the JSON value")
	ErrSyntax    = errors.New("malformed JSON")
)

// MaxDepth bounds the nesting Check follows.
const MaxDepth = 32

// KeyError is Check's error.
type KeyError struct {
	Err    error  // one of the sentinels above
	Path   string // the key's path, such as bridge.ip or ports[2].id
	Want   string // ErrCase: the path as the field spells it
	Offset int64  // in the document: where the key starts (ErrTrailing: the data)
	cause  error  // ErrSyntax: what encoding/json said
}

func (e *KeyError) Error() string {
	switch {
	case e.Err == ErrCase:
		return fmt.Sprintf("field %q: %v; want %q", e.Path, e.Err, e.Want)
	case e.Err == ErrDepth:
		return fmt.Sprintf("field %s: JSON nested deeper than %d levels", e.Path, MaxDepth)
	case e.Err == ErrTrailing:
		return fmt.Sprintf("%v (the document holds one value)", e.Err)
	case e.cause != nil:
		return fmt.Sprintf("%v: %v", e.Err, e.cause)
	}
	return fmt.Sprintf("%v %q", e.Err, e.Path)
}

func (e *KeyError) Unwrap() error { return e.Err }

// Check walks the JSON value in data (one value, valid JSON: decode it
// first for the errors of syntax and types) against the Go type t it
// decodes into (nil: any, where only duplicate keys are checked): within
// every object each key appears once, and within an object decoded into
// a struct each key is exactly the JSON name of one of its fields
// (unknown names are refused only when unknown is true, as
// Decoder.DisallowUnknownFields would). Nothing may follow the value.
func Check(data []byte, t reflect.Type, unknown bool) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	w := walker{dec: dec, data: data, unknown: unknown}
	if err := w.value(t, "", 0); err != nil {
		return err
	}
	off := dec.InputOffset()
	if _, err := dec.Token(); err != io.EOF {
		return &KeyError{Err: ErrTrailing, Offset: off + int64(len(data[off:])-len(bytes.TrimLeft(data[off:], " \t\r\n")))}
	}
	return nil
}

type walker struct {
	dec     *json.Decoder
	data    []byte
	unknown bool
}

// keyStart is where the key after offset off starts: past blanks and a
// member's comma.
func (w *walker) keyStart(off int64) int64 {
	for off < int64(len(w.data)) && strings.IndexByte(" \t\r\n,", w.data[off]) >= 0 {
		off++
	}
	return off
}

func (w *walker) token() (json.Token, error) {
	tok, err := w.dec.Token()
	if err != nil {
		return nil, &KeyError{Err: ErrSyntax, Offset: w.dec.InputOffset(), cause: err}
	}
	return tok, nil
}

// value reads one value of Go type t at path.
func (w *walker) value(t reflect.Type, path string, depth int) error {
	if depth > MaxDepth {
		return &KeyError{Err: ErrDepth, Path: path, Offset: w.dec.InputOffset()}
	}
	tok, err := w.token()
	if err != nil {
		return err
	}
	t = plainType(t)
	switch tok {
	case json.Delim('{'):
		var fields map[string]reflect.Type
		var elem reflect.Type
		if t != nil {
			switch t.Kind() {
			case reflect.Struct:
				fields = Fields(t)
			case reflect.Map:
				elem = t.Elem()
			}
		}
		seen := map[string]bool{}
		for w.dec.More() {
			start := w.keyStart(w.dec.InputOffset())
			kt, err := w.token()
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			at := key
			if path != "" {
				at = path + "." + key
			}
			if seen[key] {
				return &KeyError{Err: ErrDuplicate, Path: at, Offset: start}
			}
			seen[key] = true
			ft := elem
			if fields != nil {
				var ok bool
				if ft, ok = fields[key]; !ok {
					for name := range fields {
						if strings.EqualFold(name, key) {
							return &KeyError{Err: ErrCase, Path: at, Want: strings.TrimSuffix(at, key) + name, Offset: start}
						}
					}
					if w.unknown {
						return &KeyError{Err: ErrUnknown, Path: at, Offset: start}
					}
				}
			}
			if err := w.value(ft, at, depth+1); err != nil {
				return err
			}
		}
		_, err := w.token() // '}'
		return err
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; w.dec.More(); i++ {
			if err := w.value(elem, fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
				return err
			}
		}
		_, err := w.token() // ']'
		return err
	}
	return nil
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// plainType is t without pointers; nil where the JSON is not walked by
// field: an interface, or a type that decodes itself.
func plainType(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() == reflect.Interface {
		return nil
	}
	if p := reflect.PointerTo(t); p.Implements(jsonUnmarshaler) || p.Implements(textUnmarshaler) {
		return nil
	}
	return t
}

var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// Fields maps the JSON names of struct type t's fields (embedded
// structs' promoted) to their types, as encoding/json names them.
func Fields(t reflect.Type) map[string]reflect.Type {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	out := map[string]reflect.Type{}
	var add func(t reflect.Type, depth int)
	add = func(t reflect.Type, depth int) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if f.Anonymous && name == "" && ft.Kind() == reflect.Struct && depth < MaxDepth {
				add(ft, depth+1)
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if _, dup := out[name]; !dup {
				out[name] = f.Type
			}
		}
	}
	add(t, 0)
	fieldCache.Store(t, out)
	return out
}
