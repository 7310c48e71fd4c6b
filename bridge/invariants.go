package bridge

import (
	"fmt"

	"github.com/dxpu/dxpu/tlp"
)

// CheckInvariants verifies the bridge's internal bookkeeping: every buffer
// slot accounted for exactly once, the window and retransmission counts
// consistent, tag and credit counts in range. Tests and fuzzers call it
// after every step; it returns the first inconsistency found.
func (b *Bridge) CheckInvariants() error {
	inflight := int(b.sndNxt - b.sndUna)
	if inflight < 0 || inflight > len(b.replay) {
		return fmt.Errorf("bridge: %d TLPs in flight, window %d", inflight, len(b.replay))
	}
	retx := 0
	for s := b.sndUna; s != b.sndNxt; s++ {
		if b.replay[s&b.mask].needRetx {
			retx++
		}
	}
	if retx != b.retxCount {
		return fmt.Errorf("bridge: %d TLPs marked for retransmission, count says %d", retx, b.retxCount)
	}
	queued := b.pending[0].len() + b.pending[1].len() + b.pending[2].len()
	if got, want := len(b.txPool.free)+queued+inflight, b.txPool.capacity(); got != want {
		return fmt.Errorf("bridge: transmit slots: %d free + %d queued + %d in flight != %d", len(b.txPool.free), queued, inflight, want)
	}
	held := 0
	for _, s := range b.reorder {
		if s >= 0 {
			held++
		}
	}
	delivering := b.deliver[0].len() + b.deliver[1].len() + b.deliver[2].len()
	if got, want := len(b.rxPool.free)+held+delivering, b.rxPool.capacity(); got != want {
		return fmt.Errorf("bridge: receive slots: %d free + %d reordering + %d queued != %d", len(b.rxPool.free), held, delivering, want)
	}
	active := 0
	t := &b.txTags
	for w := int(t.base); w < int(t.base)+len(t.free.buf); w++ {
		if t.entries[w].state == tagActive {
			active++
		}
	}
	if active != t.active || t.inUse() < active || t.inUse() > len(t.free.buf) {
		return fmt.Errorf("bridge: %d active tags, count says %d, %d in use", active, t.active, t.inUse())
	}
	for c := range b.heldHdr {
		if b.heldHdr[c] < 0 || b.heldData[c] < 0 || b.outHdr[c] < 0 || b.outData[c] < 0 {
			return fmt.Errorf("bridge: class %d: negative buffer counts held %d/%d out %d/%d", c, b.heldHdr[c], b.heldData[c], b.outHdr[c], b.outData[c])
		}
		if b.advInf&(1<<hdrType(tlp.Class(c))) == 0 && b.heldHdr[c] > b.capHdr[c] {
			return fmt.Errorf("bridge: class %d: %d headers held, capacity %d", c, b.heldHdr[c], b.capHdr[c])
		}
		if b.capData[c] != 0 && b.heldData[c] > b.capData[c] {
			return fmt.Errorf("bridge: class %d: %d data units held, capacity %d", c, b.heldData[c], b.capData[c])
		}
	}
	return nil
}
