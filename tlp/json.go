package tlp

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/dxpu/dxpu/internal/strictjson"
)

// jsonPacketType is what strictjson checks a JSON TLP's keys against.
var jsonPacketType = reflect.TypeFor[jsonPacket]()

// The JSON form of a TLP (what `dxpu tlp decode` prints and `dxpu tlp
// encode` reads) has these fields, in this order, present by kind:
//
//	kind                 MRd MRdLk MWr IORd IOWr CfgRd0 CfgWr0 CfgRd1 CfgWr1 Msg MsgD
//	                     Cpl CplD CplLk CplDLk FetchAdd Swap CAS
//	fmt, type            integers (DW0 bits 31:29 and 28:24)
//	tc, attr, at         integers (attr: 1 NS, 2 RO, 4 IDO)
//	th, td, ep, ln       booleans
//	length               DW count; a field of 0 reads 1024, except on Cpl,
//	                     CplLk and Msg (Length reserved) where the raw value shows
//	requester_id, tag    requests and completions ("bb:dd.f"; all 10 tag bits)
//	first_be, last_be    memory, IO, config and atomic requests
//	address              memory, IO and atomic requests, address-routed
//	                     messages ("0x" lowercase hex)
//	ph                   memory requests and AtomicOps
//	target_id, register  config requests (register: byte offset 0..4092);
//	                     target_id also on ID-routed messages
//	message_code, routing  messages; msg_dw2 and msg_dw3 ("0x%08x") when DWs 2-3
//	                     hold bits that address/target_id do not show
//	completer_id, status, bcm, byte_count, lower_address   completions
//	                     (status "SC" "UR" "CRS" "CA" or the reserved number;
//	                     a Byte Count field of 0 reads 4096)
//	data                 payload, lowercase hex
//	ecrc                 the digest DW when TD ("0x%08x")

// MarshalJSON returns p as one JSON object.
func (p Packet) MarshalJSON() ([]byte, error) {
	b := append(make([]byte, 0, 256+2*len(p.Data)), '{')
	b = p.AppendJSONFields(b)
	return append(b, '}'), nil
}

// AppendJSONFields appends p's fields as `"name":value` pairs separated by
// commas, without braces, so that callers can add their own fields.
func (p *Packet) AppendJSONFields(b []byte) []byte {
	return p.appendJSON(b, p.TD)
}

type jw struct {
	b     []byte
	first bool
}

func (w *jw) key(k string) {
	if !w.first {
		w.b = append(w.b, ',')
	}
	w.first = false
	w.b = append(w.b, '"')
	w.b = append(w.b, k...)
	w.b = append(w.b, '"', ':')
}

func (w *jw) int(k string, v uint64) { w.key(k); w.b = strconv.AppendUint(w.b, v, 10) }
func (w *jw) bool(k string, v bool)  { w.key(k); w.b = strconv.AppendBool(w.b, v) }
func (w *jw) str(k, v string)        { w.key(k); w.b = strconv.AppendQuote(w.b, v) }
func (w *jw) hex(k string, v uint64) {
	w.key(k)
	w.b = append(w.b, `"0x`...)
	w.b = strconv.AppendUint(w.b, v, 16)
	w.b = append(w.b, '"')
}
func (w *jw) hex32(k string, v uint32) {
	w.key(k)
	w.b = fmt.Appendf(w.b, `"0x%08x"`, v)
}
func (w *jw) id(k string, v ID) { w.key(k); w.b = fmt.Appendf(w.b, `"%s"`, v) }

func (w *jw) dw0(f, t uint8, tc, attr uint8, th, td, ep, ln bool, at uint8) {
	w.int("fmt", uint64(f))
	w.int("type", uint64(t))
	w.int("tc", uint64(tc))
	w.int("attr", uint64(attr))
	w.bool("th", th)
	w.bool("td", td)
	w.bool("ep", ep)
	w.bool("ln", ln)
	w.int("at", uint64(at))
}

func (p *Packet) appendJSON(b []byte, withECRC bool) []byte {
	w := jw{b: b, first: true}
	k := p.Kind
	w.str("kind", k.String())
	f, t := p.FmtType()
	w.dw0(f, t, p.TC, p.Attr, p.TH, p.TD, p.EP, p.LN, p.AT)
	if k.hasPayload() {
		w.int("length", uint64(p.dataDWs()))
	} else {
		w.int("length", uint64(p.Length))
	}
	switch {
	case k.IsCompletion():
		w.id("completer_id", p.CompleterID)
		w.key("status")
		switch p.Status {
		case StatusSC, StatusUR, StatusCRS, StatusCA:
			w.b = strconv.AppendQuote(w.b, p.Status.String())
		default:
			w.b = strconv.AppendUint(w.b, uint64(p.Status), 10)
		}
		w.bool("bcm", p.BCM)
		w.int("byte_count", uint64(p.ByteCount))
		w.id("requester_id", p.RequesterID)
		w.int("tag", uint64(p.Tag))
		w.int("lower_address", uint64(p.LowerAddress))
	case k.IsMessage():
		w.id("requester_id", p.RequesterID)
		w.int("tag", uint64(p.Tag))
		w.int("message_code", uint64(p.MessageCode))
		w.int("routing", uint64(p.Routing))
		dw2, dw3 := p.MsgDW2, p.MsgDW3
		switch p.Routing {
		case RouteByAddress:
			w.hex("address", p.Address)
			dw2, dw3 = 0, 0
		case RouteByID:
			w.id("target_id", p.TargetID)
			dw2 &= 0xffff
		}
		if dw2 != 0 || dw3 != 0 {
			w.hex32("msg_dw2", p.MsgDW2)
			w.hex32("msg_dw3", p.MsgDW3)
		}
	default:
		w.id("requester_id", p.RequesterID)
		w.int("tag", uint64(p.Tag))
		w.int("first_be", uint64(p.FirstBE))
		w.int("last_be", uint64(p.LastBE))
		switch {
		case k.IsConfig():
			w.id("target_id", p.TargetID)
			w.int("register", uint64(p.Register))
		case k.IsIO():
			w.hex("address", p.Address)
		default:
			w.hex("address", p.Address)
			w.int("ph", uint64(p.PH))
		}
	}
	if k.hasPayload() {
		w.key("data")
		w.b = append(w.b, '"')
		w.b = hex.AppendEncode(w.b, p.Data)
		w.b = append(w.b, '"')
	}
	if p.TD && withECRC {
		w.hex32("ecrc", p.ECRC)
	}
	return w.b
}

// AppendViewJSONFields appends the fields that can be read from v, which
// may be truncated or break a rule: everything AppendJSONFields shows when
// the header is whole and Fmt/Type decode (data as far as present, ecrc
// only when the digest is there), else the DW0 fields when at least 4
// bytes are there, else nothing. It reports whether it wrote any field.
func AppendViewJSONFields(b []byte, v View) ([]byte, bool) {
	if len(v) < 4 {
		return b, false
	}
	var p Packet
	if v[0]>>5 <= Fmt4DWData && v.Kind() != KindInvalid && len(v) >= v.HeaderLen() {
		if err := p.Decode(v); err == nil {
			// Show the header as sent, even a 4-DW header for a kind
			// that should use 3 DWs.
			return p.appendJSON(b, len(v) >= v.WireLen()), true
		}
	}
	w := jw{b: b, first: true}
	if k := v.Kind(); k != KindInvalid {
		w.str("kind", k.String())
	}
	w.dw0(v.Fmt(), v.Type(), v.TC(), v.Attr(), v.TH(), v.TD(), v.EP(), v.LN(), v.AT())
	w.int("length", uint64(v.LengthField()))
	return w.b, true
}

// jsonPacket is the input form; pointers tell absent from zero.
type jsonPacket struct {
	Kind         *string         `json:"kind"`
	Fmt          *uint8          `json:"fmt"`
	Type         *uint8          `json:"type"`
	TC           uint8           `json:"tc"`
	Attr         uint8           `json:"attr"`
	TH           bool            `json:"th"`
	TD           bool            `json:"td"`
	EP           bool            `json:"ep"`
	LN           bool            `json:"ln"`
	AT           uint8           `json:"at"`
	Length       *uint16         `json:"length"`
	RequesterID  *string         `json:"requester_id"`
	Tag          uint16          `json:"tag"`
	FirstBE      uint8           `json:"first_be"`
	LastBE       uint8           `json:"last_be"`
	Address      json.RawMessage `json:"address"`
	PH           uint8           `json:"ph"`
	TargetID     *string         `json:"target_id"`
	Register     uint16          `json:"register"`
	MessageCode  uint8           `json:"message_code"`
	Routing      *uint8          `json:"routing"`
	MsgDW2       json.RawMessage `json:"msg_dw2"`
	MsgDW3       json.RawMessage `json:"msg_dw3"`
	CompleterID  *string         `json:"completer_id"`
	Status       json.RawMessage `json:"status"`
	BCM          bool            `json:"bcm"`
	ByteCount    uint16          `json:"byte_count"`
	LowerAddress uint8           `json:"lower_address"`
	Data         *string         `json:"data"`
	ECRC         json.RawMessage `json:"ecrc"`

	// Fields `dxpu tlp decode` adds; accepted and ignored.
	Line      json.RawMessage `json:"line"`
	Frame     json.RawMessage `json:"frame"`
	Encap     json.RawMessage `json:"encap"`
	Truncated json.RawMessage `json:"truncated"`
	Error     *string         `json:"error"`
	Rule      json.RawMessage `json:"rule"`
}

// jsonNumber reads a JSON number or a string holding a decimal or 0x-hex
// number.
func jsonNumber(raw json.RawMessage, field string, bits int) (uint64, error) {
	s := strings.TrimSpace(string(raw))
	if strings.HasPrefix(s, `"`) {
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, fmt.Errorf("tlp: json %s: %w", field, err)
		}
	}
	n, err := strconv.ParseUint(s, 0, bits)
	if err != nil {
		return 0, fmt.Errorf("tlp: json %s: %q is not a %d-bit number: %w", field, s, bits, ErrField)
	}
	return n, nil
}

func parseJSONID(s *string, field string) (ID, error) {
	if s == nil {
		return 0, nil
	}
	id, err := ParseID(*s)
	if err != nil {
		return 0, fmt.Errorf("tlp: json %s: %w", field, err)
	}
	return id, nil
}

// UnmarshalJSON reads the JSON form. "kind" (or "fmt" and "type") is
// required; "fmt" and "type", when given, must agree with the kind (fmt
// also selects the 4-DW header of a memory request below 4 GiB). Length
// defaults to the data's length for TLPs with data and to 1 for IO and
// config requests. The "ecrc" field is kept in p.ECRC; EncodeJSON checks it.
// Keys are given once each and spelled as documented, and nothing follows
// the object (strictjson).
func (p *Packet) UnmarshalJSON(data []byte) error {
	var j jsonPacket
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return fmt.Errorf("tlp: json: %w", err)
	}
	// encoding/json keeps the last of a key given twice, matches keys
	// regardless of case and stops at the object's end.
	if err := strictjson.Check(data, jsonPacketType, false); err != nil {
		return fmt.Errorf("tlp: json: %w", err)
	}
	if j.Error != nil {
		return fmt.Errorf("tlp: json: an error object, not a TLP (%s): %w", *j.Error, ErrField)
	}
	if len(j.Truncated) > 0 && string(j.Truncated) == "true" {
		return fmt.Errorf("tlp: json: the capture cut this TLP short; it cannot be encoded: %w", ErrTruncated)
	}
	*p = Packet{TC: j.TC, Attr: j.Attr, TH: j.TH, TD: j.TD, EP: j.EP, LN: j.LN, AT: j.AT,
		Tag: j.Tag, FirstBE: j.FirstBE, LastBE: j.LastBE, PH: j.PH, Register: j.Register,
		MessageCode: j.MessageCode, BCM: j.BCM, ByteCount: j.ByteCount, LowerAddress: j.LowerAddress}
	switch {
	case j.Kind != nil:
		k, ok := ParseKind(*j.Kind)
		if !ok {
			return fmt.Errorf("tlp: json kind %q: not a TLP kind: %w", *j.Kind, ErrField)
		}
		p.Kind = k
	case j.Fmt != nil && j.Type != nil:
		if err := checkFmtType(*j.Fmt<<5 | *j.Type&0x1f); err != nil || *j.Type > 0x1f {
			return fmt.Errorf("tlp: json fmt %d type %d: not a TLP: %w", *j.Fmt, *j.Type, ErrReservedFmtType)
		}
		p.Kind = KindOf(*j.Fmt, *j.Type)
	default:
		return fmt.Errorf("tlp: json: \"kind\" (or \"fmt\" and \"type\") is required: %w", ErrField)
	}
	k := p.Kind
	switch {
	case j.Routing != nil:
		p.Routing = Routing(*j.Routing)
	case k.IsMessage() && j.Type != nil:
		p.Routing = Routing(*j.Type & 7)
	}
	if j.Fmt != nil {
		f := *j.Fmt
		if f > Fmt4DWData || (f&2 != 0) != k.hasPayload() {
			return fmt.Errorf("tlp: json fmt %d does not fit kind %s: %w", f, k, ErrReservedFmtType)
		}
		if k.IsMemory() {
			p.Addr64 = f&1 != 0
		} else if (f&1 != 0) != k.IsMessage() {
			dws := 3
			if k.IsMessage() {
				dws = 4
			}
			return fmt.Errorf("tlp: json fmt %d: %s uses a %d-DW header: %w", f, k, dws, ErrReservedFmtType)
		}
	}
	var err error
	if p.RequesterID, err = parseJSONID(j.RequesterID, "requester_id"); err != nil {
		return err
	}
	if p.TargetID, err = parseJSONID(j.TargetID, "target_id"); err != nil {
		return err
	}
	if p.CompleterID, err = parseJSONID(j.CompleterID, "completer_id"); err != nil {
		return err
	}
	if j.Address != nil {
		if p.Address, err = jsonNumber(j.Address, "address", 64); err != nil {
			return err
		}
	}
	if j.Fmt != nil && k.IsMemory() && *j.Fmt&1 == 0 && p.Address > 0xffffffff {
		return fmt.Errorf("tlp: json fmt %d (3-DW header) cannot carry address %#x: %w", *j.Fmt, p.Address, ErrField)
	}
	if j.MsgDW2 != nil {
		n, err := jsonNumber(j.MsgDW2, "msg_dw2", 32)
		if err != nil {
			return err
		}
		p.MsgDW2 = uint32(n)
	}
	if j.MsgDW3 != nil {
		n, err := jsonNumber(j.MsgDW3, "msg_dw3", 32)
		if err != nil {
			return err
		}
		p.MsgDW3 = uint32(n)
	}
	if k.IsMessage() && p.Routing == RouteByAddress && j.Address == nil {
		p.Address = uint64(p.MsgDW2)<<32 | uint64(p.MsgDW3)
	}
	if j.Status != nil {
		s := strings.Trim(strings.TrimSpace(string(j.Status)), `"`)
		switch s {
		case "SC":
			p.Status = StatusSC
		case "UR":
			p.Status = StatusUR
		case "CRS", "RRS":
			p.Status = StatusCRS
		case "CA":
			p.Status = StatusCA
		default:
			n, err := strconv.ParseUint(s, 0, 3)
			if err != nil {
				return fmt.Errorf("tlp: json status %s: want SC, UR, CRS, CA or 0..7: %w", s, ErrField)
			}
			p.Status = Status(n)
		}
	}
	if j.Data != nil {
		if p.Data, err = hex.DecodeString(*j.Data); err != nil {
			return fmt.Errorf("tlp: json data: %w", err)
		}
	}
	switch {
	case j.Length != nil:
		p.Length = *j.Length
	case k.IsIO() || k.IsConfig():
		p.Length = 1
	}
	if j.ECRC != nil {
		n, err := jsonNumber(j.ECRC, "ecrc", 32)
		if err != nil {
			return err
		}
		p.ECRC = uint32(n)
	}
	if j.Type != nil {
		if _, t := p.FmtType(); t != *j.Type {
			return fmt.Errorf("tlp: json type %d does not fit kind %s (type %d): %w", *j.Type, k, t, ErrReservedFmtType)
		}
	}
	return nil
}

// EncodeJSON reads one JSON TLP, encodes it (validating it as Parse does)
// and appends the wire bytes to dst. When the JSON gives an "ecrc" it must
// equal the digest computed over the encoded header and data.
func EncodeJSON(dst, js []byte) ([]byte, error) {
	var p Packet
	if err := p.UnmarshalJSON(js); err != nil {
		return dst, err
	}
	start := len(dst)
	out, err := p.AppendTo(dst)
	if err != nil {
		return dst, err
	}
	if p.TD && bytes.Contains(js, []byte(`"ecrc"`)) {
		v := View(out[start:])
		if got := v.ECRC(); got != p.ECRC {
			return dst, newErr(RuleECRC, p.Kind, "ecrc", uint64(p.ECRC), ErrBadECRC,
				"given digest %#08x, header and data give %#08x", p.ECRC, got)
		}
	}
	return out, nil
}
