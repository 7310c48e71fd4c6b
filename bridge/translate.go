package bridge

import (
	"encoding/binary"

	"github.com/dxpu/dxpu/tlp"
)

// fixECRC recomputes the digest of a TLP the bridge rewrote (IDs, tag,
// config type): the receiver checks it, and a stale one would get the
// frame dropped forever. The incoming digest was checked by tlp.Parse
// before the rewrite.
func fixECRC(v tlp.View) {
	if !v.TD() || len(v) < tlp.Header3DW+4 {
		return
	}
	n := len(v) - 4
	binary.BigEndian.PutUint32(v[n:], tlp.ComputeECRC(v[:n]))
}

// translator rewrites routing IDs between the local and the wire numbering,
// in place. The table is small (a handful of functions per pair), so a
// linear scan beats a map and allocates nothing.
type translator struct {
	m             []IDMapping
	convertType1  bool
	downstreamBus uint8
}

func (t *translator) toWire(id tlp.ID) tlp.ID {
	for _, e := range t.m {
		if e.Local == id {
			return e.Wire
		}
	}
	return id
}

func (t *translator) toLocal(id tlp.ID) tlp.ID {
	for _, e := range t.m {
		if e.Wire == id {
			return e.Local
		}
	}
	return id
}

// outbound rewrites a TLP from the local side for the wire: type 1 config
// requests for the downstream bus become type 0, then requester, completer
// and target IDs are mapped.
func (t *translator) outbound(v tlp.View) {
	k := v.Kind()
	if t.convertType1 && (k == tlp.CfgRd1 || k == tlp.CfgWr1) && v.TargetID().Bus() == t.downstreamBus {
		v[0] = v[0]&^0x1f | 0x04
		k = v.Kind()
	}
	t.rewrite(v, k, t.toWire)
}

// inbound rewrites a TLP from the wire for the local side.
func (t *translator) inbound(v tlp.View) { t.rewrite(v, v.Kind(), t.toLocal) }

func (t *translator) rewrite(v tlp.View, k tlp.Kind, f func(tlp.ID) tlp.ID) {
	if len(t.m) == 0 {
		return
	}
	v.SetRequesterID(f(v.RequesterID()))
	switch {
	case k.IsCompletion():
		v.SetCompleterID(f(v.CompleterID()))
	case k.IsConfig():
		v.SetTargetID(f(v.TargetID()))
	case k.IsMessage() && v.Routing() == tlp.RouteByID:
		v.SetTargetID(f(v.TargetID()))
	}
}
