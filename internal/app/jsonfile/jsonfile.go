// Package jsonfile reads the JSON files commands are given (a box, a
// host) strictly: unknown fields are refused, and the error lists the
// fields the type does accept, as dotted paths (gpus[].memory_mib).
package jsonfile

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"

	"github.com/dxpu/dxpu/internal/app/apperr"
)

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
			if ft.Kind() == reflect.Struct {
				walk(prefix+name+suffix+".", ft)
				continue
			}
			out = append(out, prefix+name)
		}
	}
	walk("", t)
	return out
}

// withValidFields adds the valid field names to the JSON decoder's
// "unknown field" error, which names only the stranger.
func withValidFields(err error, t reflect.Type) error {
	if err == nil || !strings.Contains(err.Error(), "unknown field") {
		return err
	}
	return fmt.Errorf("%w; valid fields: %s", err, strings.Join(Fields(t), ", "))
}

// Read decodes a T from the file path ("-": stdin), refusing
// unknown fields; its errors are apperr.ErrUsage.
func Read[T any](stdin io.Reader, path string) (T, error) {
	var v T
	r := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return v, apperr.Usage(err)
		}
		defer f.Close()
		r = f
	}
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, apperr.Usage(fmt.Errorf("%s: %w", path, withValidFields(err, reflect.TypeFor[T]())))
	}
	return v, nil
}
