package tlpcodec

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/dxpu/dxpu/tlp"
)

// reservedKey is the JSON key of the header bits the codec reads as
// reserved (package doc).
const reservedKey = "reserved_bits"

// zeroPayload stands in for a payload a capture cut short: only the
// header of the re-encoding is compared.
var zeroPayload [4096]byte

// reservedMask returns the header bits set in v that the re-encoding of p
// (decoded from v) leaves 0: the bits package tlp reads as reserved. It
// returns nil when there are none or when p does not encode. enc is
// scratch space, returned for reuse; the mask is written to mask.
func reservedMask(v tlp.View, p *tlp.Packet, enc []byte, mask *[tlp.Header4DW]byte) ([]byte, []byte) {
	q := *p
	if n := v.PayloadLen(); q.Kind.HasData() && len(q.Data) != n && n <= len(zeroPayload) {
		q.Data = zeroPayload[:n]
	}
	re, err := q.AppendTo(enc[:0])
	hl := v.HeaderLen()
	if err != nil || len(v) < hl || tlp.View(re).HeaderLen() != hl {
		return nil, enc
	}
	for i := range hl {
		mask[i] = v[i] &^ re[i]
	}
	if !anySet(mask[:hl]) {
		return nil, re
	}
	return mask[:hl], re
}

// appendReserved appends `,"reserved_bits":"<hex>"`.
func appendReserved(b, mask []byte) []byte {
	b = append(b, `,"`+reservedKey+`":"`...)
	b = hex.AppendEncode(b, mask)
	return append(b, '"')
}

// colError is an error at a column of the line (1-based).
type colError struct {
	col int
	err error
}

func (e *colError) Error() string { return fmt.Sprintf("col %d: %v", e.col, e.err) }
func (e *colError) Unwrap() error { return e.err }

// member is one top-level member of a JSON object: its key through its
// value, and the comma before it (-1 for the first).
type member struct {
	key              string
	raw              json.RawMessage
	comma            int
	keyStart, valEnd int
}

// members lists the top-level members of the object that s starts with;
// ok=false when s is not one (package tlp then says what is wrong).
func members(s string) (ms []member, ok bool) {
	dec := json.NewDecoder(strings.NewReader(s))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		m := member{comma: -1}
		i := skipSpace(s, int(dec.InputOffset()))
		if len(ms) > 0 {
			if i >= len(s) || s[i] != ',' {
				return nil, false
			}
			m.comma = i
			i = skipSpace(s, i+1)
		}
		m.keyStart = i
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		m.key, _ = t.(string)
		if err := dec.Decode(&m.raw); err != nil {
			return nil, false
		}
		m.valEnd = int(dec.InputOffset())
		ms = append(ms, m)
	}
	if _, err := dec.Token(); err != nil {
		return nil, false
	}
	return ms, true
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n') {
		i++
	}
	return i
}

// blank returns s with the members whose keys drop selects replaced by
// spaces, and the commas fixed: the columns of what is left stay where
// they were, for package tlp's error messages.
func blank(s string, ms []member, drop func(string) bool) []byte {
	b := []byte(s)
	kept := false
	for _, m := range ms {
		if drop(m.key) {
			for i := m.keyStart; i < m.valEnd; i++ {
				b[i] = ' '
			}
			if m.comma >= 0 {
				b[m.comma] = ' '
			}
			continue
		}
		if !kept && m.comma >= 0 {
			b[m.comma] = ' ' // the members before it are all gone
		}
		kept = true
	}
	return b
}

// encodeReserved encodes a JSON line that may give reserved_bits: the
// TLP as package tlp encodes it, with the mask ORed into its header and
// the ECRC (with td) computed over that header. A mask over a bit that is
// not reserved, or longer than the header, is refused. handled=false
// when the line gives no reserved_bits; js is the JSON that package tlp
// read, for its errors.
func encodeReserved(dst []byte, s string) (out, js []byte, handled bool, err error) {
	if !strings.Contains(s, `"`+reservedKey+`"`) {
		return dst, nil, false, nil
	}
	ms, ok := members(s)
	if !ok {
		return dst, nil, false, nil
	}
	var rb, ecrc *member
	for i := range ms {
		switch ms[i].key {
		case reservedKey:
			rb = &ms[i]
		case "ecrc":
			ecrc = &ms[i]
		}
	}
	if rb == nil {
		return dst, nil, false, nil // not a top-level key
	}
	col := rb.valEnd - len(rb.raw) + 1
	mask, err := parseMask(rb.raw)
	if err != nil {
		return dst, nil, true, &colError{col, err}
	}
	// With bits set, the given ECRC covers them: package tlp, which
	// encodes them 0, would refuse it. It is checked here instead.
	set := anySet(mask)
	js = blank(s, ms, func(k string) bool { return k == reservedKey || set && k == "ecrc" })
	var given uint64
	if set && ecrc != nil {
		if given, err = jsonNumber(ecrc.raw, "ecrc", 32); err != nil {
			return dst, js, true, err
		}
	}
	start := len(dst)
	out, err = tlp.EncodeJSON(dst, js)
	if err != nil {
		return dst, js, true, err
	}
	t := out[start:]
	v := tlp.View(t)
	k, hl := v.Kind(), v.HeaderLen()
	if len(mask) > hl {
		return dst, js, true, &colError{col, fmt.Errorf("%s is %d bytes, longer than the %d-byte header of %s", reservedKey, len(mask), hl, k)}
	}
	if !set {
		return out, js, true, nil
	}
	enc := bytes.Clone(t)
	overlap := false
	for i, m := range mask {
		overlap = overlap || t[i]&m != 0 // a field's bit, already 1
		t[i] |= m
	}
	fixECRC(t)
	if overlap || !isReserved(t, enc) {
		return dst, js, true, &colError{col, fieldBits(enc, mask)}
	}
	if ecrc != nil && v.TD() && uint32(given) != v.ECRC() {
		return dst, js, true, &tlp.Error{Rule: tlp.RuleECRC, Kind: k, Field: "ecrc", Value: given, Err: tlp.ErrBadECRC,
			Detail: fmt.Sprintf("given digest %#08x, header (with %s) and data give %#08x", given, reservedKey, v.ECRC())}
	}
	return out, js, true, nil
}

func anySet(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return true
		}
	}
	return false
}

// parseMask reads reserved_bits: a string of hex digits, two a byte.
func parseMask(raw json.RawMessage) ([]byte, error) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return nil, fmt.Errorf("%s must be a string of hex digits (the header bytes' mask), found %.40s", reservedKey, raw)
	}
	m, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%s %q is not hex digits, two a header byte: %w", reservedKey, s, err)
	}
	return m, nil
}

// jsonNumber reads a JSON number or a string holding a decimal or 0x-hex
// number, as package tlp reads "ecrc".
func jsonNumber(raw json.RawMessage, field string, bits int) (uint64, error) {
	s := strings.TrimSpace(string(raw))
	if strings.HasPrefix(s, `"`) {
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, fmt.Errorf("tlp: json %s: %w", field, err)
		}
	}
	n, err := strconv.ParseUint(s, 0, bits)
	if err != nil {
		return 0, fmt.Errorf("tlp: json %s: %q is not a %d-bit number: %w", field, s, bits, tlp.ErrField)
	}
	return n, nil
}

// fixECRC recomputes the digest of a whole TLP with TD.
func fixECRC(t []byte) {
	v := tlp.View(t)
	if !v.TD() || len(t) < v.HeaderLen() {
		return
	}
	if n := v.HeaderLen() + v.PayloadLen(); n+4 == len(t) {
		binary.BigEndian.PutUint32(t[n:], tlp.ComputeECRC(t[:n]))
	}
}

// isReserved reports whether t (enc with other header bits set) decodes
// to the TLP that encodes as enc: the codec reads those bits as reserved.
func isReserved(t, enc []byte) bool {
	var p tlp.Packet
	v, err := tlp.Parse(t)
	if err == nil {
		err = p.Decode(v)
	}
	if err != nil {
		return false
	}
	re, err := p.Encode()
	return err == nil && bytes.Equal(re, enc)
}

// fieldBits names the first bit of mask that is not reserved in the TLP
// enc, and the fields that flipping it changes.
func fieldBits(enc, mask []byte) error {
	k := tlp.View(enc).Kind()
	var first error
	n := 0
	for i, m := range mask {
		for bit := 7; bit >= 0; bit-- {
			if m&(1<<bit) == 0 {
				continue
			}
			t := bytes.Clone(enc)
			t[i] ^= 1 << bit
			fixECRC(t)
			if enc[i]&(1<<bit) == 0 && isReserved(t, enc) {
				continue
			}
			n++
			if first == nil {
				first = fmt.Errorf("%s sets byte %d bit %d, which is not reserved in %s: %s", reservedKey, i, bit, k, changed(enc, t))
			}
		}
	}
	switch {
	case first == nil:
		return fmt.Errorf("%s %x changes the fields of %s", reservedKey, mask, k)
	case n > 1:
		return fmt.Errorf("%w (and %d more such bits)", first, n-1)
	}
	return first
}

// changed says what flipping a header bit of enc (giving t) does to it.
func changed(enc, t []byte) string {
	v, err := tlp.Parse(t)
	var p tlp.Packet
	if err == nil {
		err = p.Decode(v)
	}
	if err != nil {
		return fmt.Sprintf("changed, the TLP does not decode (rule %s)", tlp.RuleOf(err))
	}
	var q tlp.Packet
	if err := q.Decode(tlp.View(enc)); err != nil {
		return err.Error()
	}
	before, _ := members(string(q.AppendJSONFields([]byte{'{'})) + "}")
	after, _ := members(string(p.AppendJSONFields([]byte{'{'})) + "}")
	was := map[string]string{}
	for _, m := range before {
		was[m.key] = string(m.raw)
	}
	var names []string
	for _, m := range after {
		if w, ok := was[m.key]; (!ok || w != string(m.raw)) && m.key != "ecrc" {
			names = append(names, m.key)
		}
	}
	if len(names) == 0 {
		return "a field uses it"
	}
	return "it belongs to " + strings.Join(names, ", ")
}
