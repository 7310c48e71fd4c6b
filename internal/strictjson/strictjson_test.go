package strictjson

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

type inner struct {
	MAC string `json:"mac"`
}

type doc struct {
	ID     string  `json:"id"`
	Ports  int     `json:"ports,omitempty"`
	Bridge inner   `json:"bridge"`
	GPUs   []inner `json:"gpus"`
	Extra  map[string]any
}

// TestCheck: what encoding/json lets pass is refused, by path; what it
// refuses itself, and a clean document, pass.
func TestCheck(t *testing.T) {
	t.Parallel()
	dt := reflect.TypeFor[doc]()
	for _, c := range []struct {
		in      string
		t       reflect.Type
		unknown bool
		want    error
		path    string
	}{
		{`{"id":"a","ports":2,"bridge":{"mac":"m"},"gpus":[{"mac":"x"}],"Extra":{"k":1}}`, dt, true, nil, ""},
		{`{"id":"a","id":"b"}`, dt, true, ErrDuplicate, "id"},
		{`{"bridge":{"mac":"a","mac":"b"}}`, dt, true, ErrDuplicate, "bridge.mac"},
		{`{"gpus":[{"mac":"a"},{"mac":"a","mac":"b"}]}`, dt, true, ErrDuplicate, "gpus[1].mac"},
		{`{"Extra":{"k":1,"k":2}}`, dt, true, ErrDuplicate, "Extra.k"},
		{`{"ID":"a"}`, dt, true, ErrCase, "ID"},
		{`{"bridge":{"MAC":"a"}}`, dt, false, ErrCase, "bridge.MAC"},
		{`{"colour":"red"}`, dt, true, ErrUnknown, "colour"},
		{`{"colour":"red"}`, dt, false, nil, ""},
		{`{"a":1,"a":2}`, nil, false, ErrDuplicate, "a"},
		{`{"a":1} {"b":2}`, nil, false, ErrTrailing, ""},
		{`{"a":1}  ` + "\n", nil, false, nil, ""},
		{strings.Repeat("[", MaxDepth+2) + strings.Repeat("]", MaxDepth+2), nil, false, ErrDepth, ""},
	} {
		err := Check([]byte(c.in), c.t, c.unknown)
		var ke *KeyError
		switch {
		case c.want == nil && err != nil:
			t.Errorf("%s: %v, want it accepted", c.in, err)
		case c.want != nil && (!errors.Is(err, c.want) || !errors.As(err, &ke) || ke.Path != c.path && c.path != ""):
			t.Errorf("%s: %v, want %v at %q", c.in, err, c.want, c.path)
		}
	}
	var ke *KeyError
	if err := Check([]byte(`{"ID":"a"}`), dt, true); !errors.As(err, &ke) || ke.Want != "id" || ke.Offset != 1 {
		t.Errorf("case error %+v: want the field's spelling id, and the offset of the key (1)", ke)
	}
}

// FuzzCheck: Check never panics, and a document it accepts decodes, in
// encoding/json, to as many keys as it holds (none dropped as a
// duplicate).
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[{"c":2}]}`, `{"a":1,"a":2}`, `[1,{"x":{"y":null}}]`, `{"a":1}{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if Check(data, nil, false) != nil || !json.Valid(data) {
			return
		}
		var v any
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.UseNumber() // a number past float64 is still JSON
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("Check accepted %q, which encoding/json refuses: %v", data, err)
		}
		if n, m := tokenKeys(t, data), countKeys(v); m != n {
			t.Fatalf("%q: %d keys decoded from %d written: Check let a duplicate through", data, m, n)
		}
	})
}

func countKeys(v any) int {
	n := 0
	switch x := v.(type) {
	case map[string]any:
		n += len(x)
		for _, e := range x {
			n += countKeys(e)
		}
	case []any:
		for _, e := range x {
			n += countKeys(e)
		}
	}
	return n
}

// tokenKeys counts the object keys written in data, one valid value.
func tokenKeys(t *testing.T, data []byte) int {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	var inObj []bool // per open container: an object, expecting a key
	var key []bool
	n := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return n
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				if len(key) > 0 {
					key[len(key)-1] = true // the container was a member's value
				}
				inObj = append(inObj, d == '{')
				key = append(key, true)
			default:
				inObj, key = inObj[:len(inObj)-1], key[:len(key)-1]
				if len(key) > 0 {
					key[len(key)-1] = true
				}
			}
			continue
		}
		if l := len(inObj); l > 0 && inObj[l-1] {
			if key[l-1] {
				n++
			}
			key[l-1] = !key[l-1]
		}
	}
}
