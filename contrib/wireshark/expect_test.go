package wireshark

import (
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
)

// fields are the values dxpu's decoder reads, by dissector field name:
// uint64 for numbers, bool for flags, string, []byte for byte strings and
// []uint64 for a repeated number.
type fields map[string]any

// diff compares what tshark shows (got, flattened) with want. Every wanted
// field must be shown with its value, and no field under prefix may be
// shown that is not wanted. It returns one line per difference.
func diff(want fields, got map[string]any, prefix string) []string {
	var out []string
	for _, k := range sortedKeys(want) {
		g, ok := got[k]
		if !ok {
			out = append(out, fmt.Sprintf("%s missing (want %v)", k, show(want[k])))
			continue
		}
		if !matches(g, want[k]) {
			out = append(out, fmt.Sprintf("%s = %v, want %v", k, g, show(want[k])))
		}
	}
	for _, k := range sortedKeys(got) {
		if _, ok := want[k]; !ok && strings.HasPrefix(k, prefix) {
			out = append(out, fmt.Sprintf("%s = %v shown, dxpu's decoder has no such field here", k, got[k]))
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func show(w any) any {
	switch w := w.(type) {
	case uint64:
		return fmt.Sprintf("%d (%#x)", w, w)
	case []byte:
		return hex.EncodeToString(w)
	}
	return w
}

// matches reports whether tshark's value g (its JSON string form) equals
// w: numbers in decimal or 0x hex, booleans as 1 or 0, bytes as
// colon-separated hex.
func matches(g, w any) bool {
	if ws, ok := w.([]uint64); ok {
		gs := asList(g)
		if len(gs) != len(ws) {
			return false
		}
		for i := range ws {
			if !matches(gs[i], ws[i]) {
				return false
			}
		}
		return true
	}
	s, ok := g.(string)
	if !ok {
		return false
	}
	switch w := w.(type) {
	case uint64:
		n, err := strconv.ParseUint(s, 0, 64)
		return err == nil && n == w
	case bool:
		return s == map[bool]string{true: "1", false: "0"}[w]
	case string:
		return s == w
	case []byte:
		return strings.ReplaceAll(s, ":", "") == hex.EncodeToString(w)
	}
	return false
}

var creditNames = [encap.NumCreditTypes]string{
	encap.CreditPH: "ph", encap.CreditPD: "pd", encap.CreditNPH: "nph",
	encap.CreditNPD: "npd", encap.CreditCplH: "cplh", encap.CreditCplD: "cpld",
}

// headerFields is the fixed dxpu header as encap reads it.
func headerFields(h encap.Header) fields {
	fl := h.Flags()
	m := fields{
		"dxpu.version":      uint64(h.Version()),
		"dxpu.flags":        uint64(fl),
		"dxpu.flags.ack":    fl&encap.FlagAck != 0,
		"dxpu.flags.credit": fl&encap.FlagCredit != 0,
		"dxpu.flags.sack":   fl&encap.FlagSack != 0,
		"dxpu.flags.sealed": fl&seal.FlagSealed != 0,
		"dxpu.type":         uint64(h.Type()),
		"dxpu.pair":         uint64(h.PairID()),
		"dxpu.count":        uint64(h.Count()),
		"dxpu.body_len":     uint64(h.BodyLen()),
		"dxpu.seq":          uint64(h.Seq()),
		"dxpu.ack":          uint64(h.Ack()),
		"dxpu.sack":         uint64(h.Sack()),
		"dxpu.infinite":     uint64(h.InfiniteMask()),
		"dxpu.reserved":     uint64(h[27]),
	}
	for t, name := range creditNames {
		ct := encap.CreditType(t)
		m["dxpu.limit."+name] = uint64(h.CreditLimit(ct))
		m["dxpu.infinite."+name] = h.Infinite(ct)
	}
	return m
}

// controlFields is a control message as encap.ParseControl reads it; raw
// is the body it came from (for the reserved byte, which it skips).
func controlFields(c encap.Control, raw []byte) fields {
	m := fields{
		"dxpu.ctl.type":         uint64(c.Type),
		"dxpu.ctl.version":      uint64(encap.ControlVersion),
		"dxpu.ctl.role":         uint64(c.Role),
		"dxpu.ctl.session":      uint64(c.Session),
		"dxpu.ctl.peer_session": uint64(c.PeerSession),
	}
	switch c.Type {
	case encap.CtlKeepalive, encap.CtlKeepaliveAck:
		m["dxpu.ctl.probe"] = uint64(c.Probe)
		return m
	case encap.CtlReset:
		m["dxpu.ctl.reason"] = uint64(c.Reason)
		return m
	}
	m["dxpu.ctl.tag_bits"] = uint64(c.TagBits)
	m["dxpu.ctl.window"] = uint64(c.Window)
	m["dxpu.ctl.max_tlp"] = uint64(c.MaxTLP)
	m["dxpu.ctl.isn"] = uint64(c.ISN)
	m["dxpu.ctl.infinite"] = uint64(c.Infinite)
	m["dxpu.ctl.reserved"] = uint64(raw[27])
	for t, name := range creditNames {
		m["dxpu.ctl.credit."+name] = uint64(c.Credits[t])
		m["dxpu.ctl.infinite."+name] = c.Infinite&(1<<t) != 0
	}
	return m
}

// tlpFields is one TLP as tlp.View and tlp.Packet read it. v holds at
// least the whole header and a valid Fmt/Type; index is the TLP's place in
// its frame and seq its sequence number (dxpu TLP frames only).
func tlpFields(v tlp.View, index int, seq *uint32) (fields, error) {
	var p tlp.Packet
	if err := p.Decode(v); err != nil {
		return nil, err
	}
	k := v.Kind()
	m := fields{
		"dxpu.tlp.index":    uint64(index),
		"dxpu.tlp.kind":     k.String(),
		"dxpu.tlp.fmt":      uint64(v.Fmt()),
		"dxpu.tlp.type":     uint64(v.Type()),
		"dxpu.tlp.t9":       uint64(p.Tag >> 9 & 1),
		"dxpu.tlp.t8":       uint64(p.Tag >> 8 & 1),
		"dxpu.tlp.tc":       uint64(v.TC()),
		"dxpu.tlp.attr":     uint64(v.Attr()),
		"dxpu.tlp.attr.ns":  v.Attr()&tlp.AttrNS != 0,
		"dxpu.tlp.attr.ro":  v.Attr()&tlp.AttrRO != 0,
		"dxpu.tlp.attr.ido": v.Attr()&tlp.AttrIDO != 0,
		"dxpu.tlp.ln":       v.LN(),
		"dxpu.tlp.th":       v.TH(),
		"dxpu.tlp.td":       v.TD(),
		"dxpu.tlp.ep":       v.EP(),
		"dxpu.tlp.at":       uint64(v.AT()),
		"dxpu.tlp.length":   uint64(v.LengthField()),
		"dxpu.tlp.tag":      uint64(p.Tag),
	}
	if seq != nil {
		m["dxpu.tlp.seq"] = uint64(*seq)
	}
	m["dxpu.tlp.requester_id"] = uint64(p.RequesterID)
	switch {
	case k.IsCompletion():
		m["dxpu.tlp.completer_id"] = uint64(p.CompleterID)
		m["dxpu.tlp.status"] = uint64(p.Status)
		m["dxpu.tlp.bcm"] = p.BCM
		m["dxpu.tlp.byte_count"] = uint64(v.ByteCountField())
		m["dxpu.tlp.lower_address"] = uint64(p.LowerAddress)
	case k.IsMessage():
		m["dxpu.tlp.message_code"] = uint64(p.MessageCode)
		m["dxpu.tlp.routing"] = uint64(p.Routing)
		m["dxpu.tlp.msg_dw2"] = uint64(p.MsgDW2)
		m["dxpu.tlp.msg_dw3"] = uint64(p.MsgDW3)
		switch p.Routing {
		case tlp.RouteByAddress:
			m["dxpu.tlp.address"] = p.Address
		case tlp.RouteByID:
			m["dxpu.tlp.target_id"] = uint64(p.TargetID)
		}
	default:
		m["dxpu.tlp.first_be"] = uint64(p.FirstBE)
		m["dxpu.tlp.last_be"] = uint64(p.LastBE)
		switch {
		case k.IsConfig():
			m["dxpu.tlp.target_id"] = uint64(p.TargetID)
			m["dxpu.tlp.register"] = uint64(p.Register)
		case k.IsIO():
			m["dxpu.tlp.address"] = p.Address
		default:
			m["dxpu.tlp.address"] = p.Address
			m["dxpu.tlp.ph"] = uint64(p.PH)
		}
	}
	if k.HasData() && len(p.Data) > 0 {
		m["dxpu.tlp.data"] = p.Data
	}
	if v.TD() && len(v) >= v.WireLen() {
		m["dxpu.tlp.ecrc"] = uint64(p.ECRC)
	}
	return m, nil
}

// frameExpert names the expert info the dissector shows for an error of
// encap.ParseFrame, or "" when the error lies below dxpu (IPv4, VLAN
// tags), which Wireshark's own dissectors judge.
func frameExpert(f *encap.Frame, err error) string {
	if f.Encap() == encap.EncapNone {
		return ""
	}
	for _, e := range []struct {
		sentinel error
		expert   string
	}{
		{encap.ErrShort, "short"},
		{encap.ErrUDPLength, "short"}, // a UDP payload too small for the header
		{encap.ErrTruncated, "short"}, // a NetTLP header cut by the capture
		{encap.ErrVersion, "version"},
		{encap.ErrMsgType, "msg_type"},
		{encap.ErrTLPCount, "count"},
		{encap.ErrBodyLength, "body_len"},
		{encap.ErrTLPLength, "tlp_len"},
		{encap.ErrNetTLP, "nettlp"},
	} {
		if errors.Is(err, e.sentinel) {
			return "dxpu.expert." + e.expert
		}
	}
	return ""
}

// structuralTLPError reports whether tlp.Parse's error is one the
// dissector checks (the TLP's size and kind); the rules on field values
// are left to `dxpu tlp decode`.
func structuralTLPError(err error) bool {
	for _, s := range []error{tlp.ErrTruncated, tlp.ErrReservedFmtType, tlp.ErrPrefix,
		tlp.ErrLengthMismatch, tlp.ErrUnexpectedData} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
