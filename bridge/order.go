package bridge

import "github.com/dxpu/dxpu/tlp"

// meta describes a queued TLP for the ordering rules and bookkeeping.
type meta struct {
	slot  int32
	n     uint16
	class tlp.Class
	attr  uint8
	// id is the requester ID of a request, the completer ID of a
	// completion: what ID-based ordering compares.
	id tlp.ID
	// ioCfgWr marks a completion without data and with status SC: the
	// completion of an IO or config write, which may pass posted requests.
	ioCfgWr bool
	order   uint64 // arrival order (tx) or sequence (rx), increasing
	wireTag int32  // non-posted, tx side: index into the tag table; -1 none
	gen     uint32 // tag entry generation the request belongs to
	addr    uint64 // posted memory writes: address, for loss reports
	hasAddr bool
	data    bool   // the TLP carries a payload
	key     uint32 // completions: requester ID and tag, the transaction
	payload uint16 // payload bytes
}

// fill sets m to describe TLP v held in slot. The queues fill their
// entries in place: the data path copies no metadata.
func (m *meta) fill(v tlp.View, slot int32) {
	k := v.Kind()
	*m = meta{slot: slot, n: uint16(len(v)), class: k.Class(), attr: v.Attr(), wireTag: -1, data: v.HasData()}
	if k.IsCompletion() {
		m.id = v.CompleterID()
		m.key = uint32(v.RequesterID())<<10 | uint32(v.Tag())
		m.ioCfgWr = k == tlp.Cpl && v.Status() == tlp.StatusSC
	} else {
		m.id = v.RequesterID()
	}
	m.payload = uint16(v.PayloadLen())
	if k == tlp.MWr {
		m.addr, m.hasAddr = v.Address(), true
	}
}

// mayPassPosted applies the PCIe ordering table to a later TLP and an earlier
// posted request (same traffic class): posted never passes posted (the
// posted queue is FIFO); a completion may pass with RO, with IDO and a
// different ID, or when it completes an IO/config write; a read request only
// with IDO; a non-posted request with data with RO or IDO.
func mayPassPosted(later, earlier *meta) bool {
	switch later.class {
	case tlp.Posted:
		return false
	case tlp.Completion:
		if later.attr&tlp.AttrRO != 0 || later.ioCfgWr {
			return true
		}
	}
	return later.attr&tlp.AttrIDO != 0 && later.id != earlier.id
}

// mustWait reports whether a later non-posted request or completion must
// wait for an earlier posted request still queued in posted. Posted requests
// and completions always pass non-posted requests, and nothing is ordered
// behind a completion, so only the posted queue can hold a TLP back.
func mustWait(later *meta, posted *fifo[meta]) bool {
	if later.class == tlp.Posted || posted.len() == 0 || posted.peek().order > later.order {
		return false
	}
	if later.class == tlp.Completion && (later.attr&tlp.AttrRO != 0 || later.ioCfgWr) {
		return false
	}
	if later.class == tlp.NonPosted && later.attr&tlp.AttrRO != 0 && later.data {
		// RO lets a non-posted request with data pass; a read has no data.
		return false
	}
	if later.attr&tlp.AttrIDO == 0 {
		return true
	}
	for i := 0; i < posted.len(); i++ {
		e := posted.at(i)
		if e.order > later.order {
			break
		}
		if !mayPassPosted(later, e) {
			return true
		}
	}
	return false
}

// lookahead bounds how far behind a blocked head of the completion queue
// a completion that may pass (RO, IDO, IO/config write) is looked for.
const lookahead = 16

// passingCompletion returns the index in q (a completion queue whose head
// must wait for an earlier posted request) of the first completion that may
// pass the posted requests and all earlier completions of its own
// transaction are gone; -1 if none. Different transactions' completions may
// pass each other; one transaction's never do.
func passingCompletion(q, posted *fifo[meta], ok func(*meta) bool) int {
	n := min(q.len(), lookahead)
	for i := 1; i < n; i++ {
		m := q.at(i)
		if mustWait(m, posted) || !ok(m) {
			continue
		}
		same := false
		for j := 0; j < i && !same; j++ {
			same = q.at(j).key == m.key
		}
		if !same {
			return i
		}
	}
	return -1
}
