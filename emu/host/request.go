package host

import (
	"fmt"

	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// request is the slot of one CPU request in flight, indexed by its tag.
// Slots are reused and their callbacks are method values made once, so
// issuing a request and completing it allocate nothing.
type request struct {
	rc     *RootComplex
	tag    uint16
	active bool
	timer  sim.Timer
	// cb gets each completion, or nil on timeout.
	cb func(v tlp.View)
	// An MMIO read gathers n bytes in data, then hands them to read.
	n    int
	data []byte
	read func([]byte, error)
	// Method values of this slot, made once.
	timeoutF func()
	mmioF    func(v tlp.View)
}

// reserve takes the next free tag for a request whose completions go to
// cb and arms its completion timeout; the caller sends the request.
func (rc *RootComplex) reserve(cb func(v tlp.View)) (*request, error) {
	for i := 0; i < 256; i++ {
		r := &rc.reqs[rc.next]
		rc.next++
		if r.active {
			continue
		}
		r.active, r.cb = true, cb
		r.timer = rc.s.After(rc.cfg.CompletionTimeout, r.timeoutF)
		return r, nil
	}
	return nil, ErrNoTags
}

// timeout ends a request that no completion finished in time.
func (r *request) timeout() {
	if r.active {
		r.active = false
		r.cb(nil)
	}
}

// completion routes a completion to the request that owns its tag.
func (rc *RootComplex) completion(v tlp.View) {
	tag := v.Tag()
	if tag > 255 || !rc.reqs[tag].active || v.RequesterID() != 0 {
		return
	}
	r := &rc.reqs[tag]
	last := !v.HasData() || v.ByteCount() <= len(v.Payload())-int(v.LowerAddress()&3)
	if last {
		r.active = false
		r.timer.Stop()
	}
	r.cb(v)
}

// mmioCompletion gathers an MMIO read's data and hands it over once all
// n bytes are in.
func (r *request) mmioCompletion(v tlp.View) {
	if err := statusErr(v); err != nil {
		r.read(nil, err)
		return
	}
	p := v.Payload()
	lead := int(v.LowerAddress() & 3)
	k := min(v.ByteCount(), len(p)-lead, r.n-len(r.data))
	if k <= 0 {
		r.read(nil, fmt.Errorf("host: MMIO read completion from %v carries no data", v.CompleterID()))
		return
	}
	r.data = append(r.data, p[lead:lead+k]...)
	if len(r.data) >= r.n {
		r.read(r.data, nil)
	}
}
