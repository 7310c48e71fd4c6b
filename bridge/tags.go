package bridge

import (
	"fmt"
	"time"

	"github.com/dxpu/dxpu/tlp"
)

// Tag entry states.
const (
	tagFree uint8 = iota
	tagActive
	// tagStale: the bridge answered the request itself (timeout); the tag
	// stays out of use until the real completion shows up or a quarantine
	// of one more completion timeout passes, so a late completion can never
	// be matched to a newer request.
	tagStale
)

// tagEntry tracks one non-posted request by the tag it carries on the wire.
type tagEntry struct {
	state     uint8
	gen       uint32
	kind      tlp.Kind
	origTag   uint16 // tag the local requester used (tx table)
	origReq   tlp.ID // requester ID as the local side knows it (tx table)
	wireReq   tlp.ID // requester ID on the wire
	completer tlp.ID // completer ID for synthesized completions
	remaining int    // bytes still to be returned
	nextLA    uint8  // Lower Address of the next completion
	start     time.Duration
	epoch     uint32 // rx table: session the request arrived in
}

// tagTable indexes requests by wire tag. The tx table assigns wire tags to
// requests the local side sends (from the peer's tag space), the rx table
// records requests delivered to the local side (tags chosen by the peer).
type tagTable struct {
	entries []tagEntry
	base    uint16 // first usable tag: 0, or 256 for 10-bit tag spaces
	free    fifo[uint16]
	active  int
	limit   int // most entries in use at once
	// nextCheck is a lower bound on the earliest deadline of an entry.
	nextCheck time.Duration
}

// tagSpace returns the first tag and the number of tags of a space: 8-bit
// tags 0..255; 10-bit tags 256..1023 (values with Tag[9:8] = 00 are left to
// 8-bit requesters, hence 768).
func tagSpace(bits int) (base, n int) {
	if bits == 10 {
		return 256, 768
	}
	return 0, 256
}

func newTagTable(bits, limit int) tagTable {
	base, n := tagSpace(bits)
	if limit <= 0 || limit > n {
		limit = n
	}
	t := tagTable{entries: make([]tagEntry, 1024), base: uint16(base), free: newFifo[uint16](n), limit: limit, nextCheck: noDeadline}
	for i := 0; i < n; i++ {
		t.free.push(uint16(base + i))
	}
	return t
}

// alloc takes the least recently used free tag; ok false if none or the
// limit is reached. Stale entries count against the limit.
func (t *tagTable) alloc() (uint16, bool) {
	if t.free.len() == 0 || t.inUse() >= t.limit {
		return 0, false
	}
	w := t.free.pop()
	e := &t.entries[w]
	e.gen++
	e.state = tagActive
	t.active++
	return w, true
}

func (t *tagTable) inUse() int { return len(t.free.buf) - t.free.len() }

func (t *tagTable) release(w uint16) {
	e := &t.entries[w]
	if e.state == tagActive {
		t.active--
	}
	e.state = tagFree
	t.free.push(w)
}

// expire walks the table at now: a request open for timeout goes stale
// and is handed to timedOut (which answers it); a stale tag whose
// quarantine of another timeout passed is free again. It sets nextCheck to
// the next time something can expire.
func (t *tagTable) expire(now, timeout time.Duration, timedOut func(*tagEntry)) {
	next := noDeadline
	for w := int(t.base); w < int(t.base)+len(t.free.buf); w++ {
		e := &t.entries[w]
		switch e.state {
		case tagActive:
			if now-e.start >= timeout {
				timedOut(e)
				e.state = tagStale
				t.active--
				e.start = now
			}
			next = min(next, e.start+timeout)
		case tagStale:
			if now-e.start >= timeout {
				t.release(uint16(w))
				continue
			}
			next = min(next, e.start+timeout)
		}
	}
	t.nextCheck = next
}

// abort frees every tag, handing each open request to open first (which
// answers it).
func (t *tagTable) abort(open func(*tagEntry)) {
	for w := int(t.base); w < int(t.base)+len(t.free.buf); w++ {
		e := &t.entries[w]
		switch e.state {
		case tagActive:
			open(e)
			t.release(uint16(w))
		case tagStale:
			t.release(uint16(w))
		}
	}
	t.nextCheck = noDeadline
}

// owns reports whether wire tag w belongs to the table's tag space.
func (t *tagTable) owns(w uint16) bool {
	return int(w) >= int(t.base) && int(w) < int(t.base)+len(t.free.buf)
}

// check verifies the count of active entries.
func (t *tagTable) check() error {
	active := 0
	for w := int(t.base); w < int(t.base)+len(t.free.buf); w++ {
		if t.entries[w].state == tagActive {
			active++
		}
	}
	if active != t.active || t.inUse() < active || t.inUse() > len(t.free.buf) {
		return fmt.Errorf("bridge: %d active tags, count says %d, %d in use", active, t.active, t.inUse())
	}
	return nil
}

// Completion accounting results.
const (
	cplMore    = iota // matched, more completions to come
	cplLast           // matched, the request is complete
	cplNoMatch        // no request with this tag and requester
	cplLate           // the request was already answered by the bridge
)

// account matches completion c against entry e and updates the bytes still
// expected. A completion whose status is not SC, a completion without
// data, or one carrying the last bytes ends the request.
func account(e *tagEntry, c tlp.View, wireReq tlp.ID, mism *uint64) int {
	switch e.state {
	case tagFree:
		return cplNoMatch
	}
	if c.RequesterID() != wireReq {
		return cplNoMatch
	}
	if e.state == tagStale {
		return cplLate
	}
	if c.Status() != tlp.StatusSC || !c.HasData() {
		return cplLast
	}
	bc := c.ByteCount()
	if bc != e.remaining {
		*mism++
	}
	carried := c.PayloadLen()
	if e.kind == tlp.MRd || e.kind == tlp.MRdLk {
		carried -= int(c.LowerAddress() & 3)
	}
	if carried >= bc {
		return cplLast
	}
	e.remaining = bc - carried
	e.nextLA = uint8((int(c.LowerAddress()) + carried) & 0x7f)
	return cplMore
}

// setRequest fills the byte accounting of e from request v: Byte Count and
// Lower Address of the first completion follow the spec's per-kind rules
// (memory reads from Length and BEs, IO/config 4 and 0, AtomicOps the operand
// size and a reserved, zero Lower Address), which tlp computes.
func setRequest(e *tagEntry, v tlp.View) {
	e.kind = v.Kind()
	e.remaining = v.RequestBytes()
	e.nextLA = v.RequestLowerAddress()
}
