package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// eventCount walks valid JSON with encoding/json and returns the number of
// elements in the traceEvents arrays (or the top-level array); ok is false
// when the document does not have the shape of a trace.
func eventCount(data []byte) (n int64, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return 0, false
	}
	countArray := func() bool {
		for dec.More() {
			var raw json.RawMessage
			if dec.Decode(&raw) != nil {
				return false
			}
			n++
		}
		_, err := dec.Token() // ]
		return err == nil
	}
	switch tok {
	case json.Delim('['):
		return n, countArray()
	case json.Delim('{'):
		seen := false
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return 0, false
			}
			if k == "traceEvents" {
				t, err := dec.Token()
				if err != nil || t != json.Delim('[') {
					return 0, false
				}
				if !countArray() {
					return 0, false
				}
				seen = true
				continue
			}
			var raw json.RawMessage
			if dec.Decode(&raw) != nil {
				return 0, false
			}
		}
		return n, seen
	}
	return 0, false
}

// FuzzDecode checks the decoder against encoding/json: it accepts exactly
// the valid documents (bar nesting and number-length limits), counts the
// same events, reports errors inside the input, and keeps only sane ops.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(newSchema))
	f.Add([]byte(oldSchema))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"traceEvents":[{"ph":"X","cat":"kernel","name":"k\u00e9\ud83d\ude00","ts":-1e2,"dur":3.14159,"args":{"stream":"7"}}]}`))
	f.Add([]byte(`{"traceEvents":[{"ph":"X","cat":"cuda_runtime","name":"ProfilerStep#x","ts":1}], "traceEvents": [1, [2], {"a": null}]}`))
	f.Add([]byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03"))
	var syn bytes.Buffer
	writeSynthetic(&syn, 60)
	f.Add(syn.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := Decode(bytes.NewReader(data))
		gz := len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b
		var se *SyntaxError
		if errors.As(err, &se) && !gz && (se.Offset < 0 || se.Offset > int64(len(data))) {
			t.Fatalf("error offset %d outside %d bytes of input: %v", se.Offset, len(data), err)
		}
		if err == nil {
			if !gz && !json.Valid(data) {
				t.Fatalf("accepted invalid JSON %q", data)
			}
			if int64(len(w.Ops)+len(w.Steps)) > w.Events {
				t.Fatalf("%d ops and %d steps from %d events", len(w.Ops), len(w.Steps), w.Events)
			}
			for _, o := range w.Ops {
				if o.Dur < 0 || o.Kind < Runtime || o.Kind > Sync {
					t.Fatalf("bad op %+v", o)
				}
				if o.Kind == Memcpy {
					if dir, pg := ParseCopy(o.Name); dir != o.Copy || pg != o.Pageable {
						t.Fatalf("memcpy %q has copy %v pageable %v", o.Name, o.Copy, o.Pageable)
					}
				}
			}
		}
		if gz || !json.Valid(data) {
			if !gz && err == nil {
				t.Fatal("unreachable")
			}
			return
		}
		n, shaped := eventCount(data)
		if !shaped {
			if err == nil {
				t.Fatalf("accepted %q, which has no traceEvents array", data)
			}
			return
		}
		if err != nil {
			if msg := err.Error(); strings.Contains(msg, "too deep") || strings.Contains(msg, "too long") {
				return
			}
			if n == 0 && errors.Is(err, ErrNoEvents) {
				return
			}
			t.Fatalf("rejected valid trace %q: %v", data, err)
		}
		if w.Events != n {
			t.Fatalf("counted %d events, encoding/json %d", w.Events, n)
		}
	})
}
