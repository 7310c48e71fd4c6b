package tlp

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

func addSeeds(f *testing.F) {
	for _, v := range validVectors {
		f.Add(unhex(f, v.hex))
	}
	for _, v := range errorVectors {
		f.Add(unhex(f, v.hex))
	}
}

// FuzzParse checks Parse's invariants on arbitrary bytes: it never panics;
// an accepted TLP is exactly WireLen bytes, decodes, re-encodes to a TLP
// that parses and decodes to the same Packet, and re-encodes to the input
// itself whenever the input's reserved bits are zero (checked by encoding
// twice: the second encoding must equal the first); ParseTruncated agrees
// with Parse; errors are *Error matching ErrMalformed; the JSON of whatever
// can be read is valid.
func FuzzParse(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := Parse(b)
		lv, cut, lerr := ParseTruncated(b)
		if quickOK(b) && ((lerr != nil && !errors.Is(lerr, ErrBadECRC)) || cut) {
			t.Fatalf("fast path accepts what the full path rejects: cut %v err %v", cut, lerr)
		}
		if js, ok := AppendViewJSONFields([]byte{'{'}, View(b)); ok && !json.Valid(append(js, '}')) {
			t.Fatalf("invalid JSON %s", js)
		}
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrMalformed) || e.Rule == "" {
				t.Fatalf("error %v (%T) is not a rule *Error", err, err)
			}
			if lerr == nil && !cut {
				t.Fatalf("ParseTruncated accepted a whole TLP Parse rejects: %v", err)
			}
			if lerr == nil && cut && !errors.Is(err, ErrTruncated) {
				t.Fatalf("ParseTruncated says cut, Parse says %v", err)
			}
			return
		}
		if lerr != nil || cut || len(lv) != len(v) {
			t.Fatalf("ParseTruncated disagrees: cut %v err %v", cut, lerr)
		}
		if len(v) != v.WireLen() || !v.CheckECRC() {
			t.Fatalf("accepted %d bytes, WireLen %d", len(v), v.WireLen())
		}
		var p Packet
		if err := p.Decode(v); err != nil {
			t.Fatal(err)
		}
		enc, err := p.Encode()
		if err != nil {
			t.Fatalf("re-encode of %x: %v", b, err)
		}
		var q Packet
		v2, err := Parse(enc)
		if err != nil {
			t.Fatalf("re-encoded %x does not parse: %v", enc, err)
		}
		if err := q.Decode(v2); err != nil {
			t.Fatal(err)
		}
		enc2, err := q.Encode()
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable: %x then %x (%v)", enc, enc2, err)
		}
		if reservedBitsZero(v) && !bytes.Equal(enc, b) {
			t.Fatalf("encode(decode(x)) != x\n x %x\n e %x", b, enc)
		}
		js, _ := p.MarshalJSON()
		enc3, err := EncodeJSON(nil, js)
		if err != nil || !bytes.Equal(enc3, enc) {
			t.Fatalf("JSON round trip %s: %x (%v), want %x", js, enc3, err, enc)
		}
	})
}

// reservedBitsZero reports whether the header bits outside DW0 that no
// field covers are zero (reserved bits Parse ignores and Packet drops).
func reservedBitsZero(v View) bool {
	k := v.Kind()
	switch {
	case k.IsCompletion():
		return v[11]&0x80 == 0
	case k.IsConfig():
		return v[10]&0xf0 == 0 && v[11]&3 == 0
	case k.IsIO():
		return v[11]&3 == 0
	}
	return true
}

// FuzzDecodeJSON checks that any JSON that encodes yields a TLP that
// parses, and that decoding that TLP to JSON and encoding again gives the
// same bytes.
func FuzzDecodeJSON(f *testing.F) {
	for _, v := range validVectors {
		f.Add([]byte(v.want))
	}
	f.Add([]byte(`{"kind":"MRd","length":1,"address":"0x1000","first_be":15}`))
	f.Add([]byte(`{"fmt":3,"type":18,"data":"00"}`))
	f.Fuzz(func(t *testing.T, js []byte) {
		b, err := EncodeJSON(nil, js)
		if err != nil {
			return
		}
		p, err := Decode(b)
		if err != nil {
			t.Fatalf("EncodeJSON(%s) = %x which does not parse: %v", js, b, err)
		}
		js2, _ := p.MarshalJSON()
		b2, err := EncodeJSON(nil, js2)
		if err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("%s -> %x -> %s -> %x (%v)", js, b, js2, b2, err)
		}
	})
}
