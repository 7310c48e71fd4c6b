package bridge

import (
	"github.com/dxpu/dxpu/tlp"
)

// NextTLP returns the next TLP for the local PCIe side among the classes in
// accept, obeying the ordering rules (a completion or request never passes
// a posted request it must not, so refusing posted TLPs can hold back the
// others). Completions the bridge synthesized come first. The View is valid
// until the next call to HandleFrame or NextTLP; copy it to keep it. Unless
// AutoRelease is set, its credits stay in use until Release.
func (b *Bridge) NextTLP(accept ClassMask) (tlp.View, bool) {
	if accept&AcceptCompletion != 0 && b.synth.len() > 0 {
		s := b.synth.pop()
		b.ctr.TLPsDelivered++
		if !b.cfg.AutoRelease {
			b.buffers.handOutSynth()
		}
		return b.buildSynth(&s), true
	}
	best, bestIdx := -1, 0
	for c := range b.deliver {
		q := &b.deliver[c]
		if accept&(1<<c) == 0 || q.len() == 0 {
			continue
		}
		h := q.peek()
		idx := 0
		if accept&AcceptPosted == 0 && mustWait(h, &b.deliver[tlp.Posted]) {
			if c != int(tlp.Completion) {
				continue
			}
			if idx = passingCompletion(q, &b.deliver[tlp.Posted], anyMeta); idx < 0 {
				continue
			}
			h = q.at(idx)
		}
		if best >= 0 && b.deliver[best].at(bestIdx).order < h.order {
			continue
		}
		best, bestIdx = c, idx
	}
	if best < 0 {
		return nil, false
	}
	m := b.deliver[best].at(bestIdx)
	v := tlp.View(b.rxPool.bytes(m.slot, int(m.n)))
	b.rxPool.put(m.slot)
	dc := dataUnits(m)
	b.deliver[best].drop(bestIdx)
	b.ctr.TLPsDelivered++
	if b.cfg.AutoRelease {
		b.creditReturn(tlp.Class(best), 1, dc)
	} else {
		b.buffers.handOut(tlp.Class(best), dc)
	}
	return v, true
}

func anyMeta(*meta) bool { return true }

// Release returns the credits of TLPs the local side has consumed from
// NextTLP: headers TLPs of class c carrying data 16-byte data units in all.
// The peer learns the new limits with the next frame. It is an error to
// release more than was delivered.
func (b *Bridge) Release(c tlp.Class, headers, data int) error {
	headers, err := b.buffers.release(c, headers, data)
	if err != nil {
		return err
	}
	b.creditReturn(c, headers, data)
	return nil
}

// creditReturn frees buffer space of class c and schedules the credit
// update.
func (b *Bridge) creditReturn(c tlp.Class, headers, data int) {
	if headers == 0 && data == 0 {
		return
	}
	b.buffers.free(c, headers, data)
	if !b.creditDirty {
		b.creditDirty = true
		b.creditDue = b.now + b.cfg.AckDelay
	}
}
