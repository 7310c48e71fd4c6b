package bridge

import (
	"fmt"

	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
)

// recvCredits is the receiver's ledger of its own buffers, per class: what
// each holds (capacity), what received TLPs occupy (held), how much of that
// the local side took from NextTLP and has not released yet (out), and the
// cumulative limits advertised to the peer, kept as the session's initial
// credits (base) plus everything released since.
type recvCredits struct {
	capHdr, capData   [NumClasses]int // capData 0: infinite
	heldHdr, heldData [NumClasses]int
	outHdr, outData   [NumClasses]int
	// synthOut: completions the bridge synthesized, handed out and not
	// released; they took no credit from the peer.
	synthOut int
	base     [encap.NumCreditTypes]uint32
	released [encap.NumCreditTypes]uint32
	// oldHdr, oldData: what TLPs of an earlier session still held at the
	// start of this one occupy. The initial credits left that room out, so
	// freeing it raises no limit: the limits never run ahead of the
	// peer's consumed count by more than the initial credits (CRD-4).
	oldHdr, oldData [NumClasses]int
	infinite        uint8 // bit t: type t is advertised infinite
}

// newRecvCredits sizes the ledger from the configured buffers; a class
// with infinite header credits holds infiniteDepth TLPs. It returns the
// receive queue depth of each class too.
func newRecvCredits(credits [NumClasses]ClassCredits, infiniteDepth int) (recvCredits, [NumClasses]int) {
	var r recvCredits
	var depth [NumClasses]int
	for c, cc := range credits {
		depth[c] = cc.Headers
		if depth[c] == 0 {
			depth[c] = infiniteDepth
			r.infinite |= 1 << hdrType(tlp.Class(c))
		}
		if cc.Data == 0 {
			r.infinite |= 1 << dataType(tlp.Class(c))
		}
		r.capHdr[c], r.capData[c] = depth[c], cc.Data
	}
	return r, depth
}

// restart begins a session: the initial credits are the room left now
// (TLPs of the old session may still be held).
func (r *recvCredits) restart() {
	for c := range r.capHdr {
		cl := tlp.Class(c)
		r.base[hdrType(cl)] = uint32(r.capHdr[c] - r.heldHdr[c])
		r.base[dataType(cl)] = uint32(max(r.capData[c]-r.heldData[c], 0))
		r.released[hdrType(cl)], r.released[dataType(cl)] = 0, 0
		r.oldHdr[c], r.oldData[c] = r.heldHdr[c], r.heldData[c]
	}
}

// limit is the cumulative limit of type t advertised to the peer.
func (r *recvCredits) limit(t encap.CreditType) uint32 { return r.base[t] + r.released[t] }

func (r *recvCredits) isInfinite(t encap.CreditType) bool { return r.infinite&(1<<t) != 0 }

// room reports whether class c can hold one more TLP of data data units.
func (r *recvCredits) room(c tlp.Class, data int) bool {
	if r.capData[c] != 0 && r.heldData[c]+data > r.capData[c] {
		return false
	}
	return r.isInfinite(hdrType(c)) || r.heldHdr[c] < r.capHdr[c]
}

// hold takes buffer space for one received TLP.
func (r *recvCredits) hold(c tlp.Class, data int) {
	r.heldHdr[c]++
	r.heldData[c] += data
}

// handOut records a TLP given to the local side that it will Release.
func (r *recvCredits) handOut(c tlp.Class, data int) {
	r.outHdr[c]++
	r.outData[c] += data
}

// handOutSynth records a synthesized completion given to the local side.
func (r *recvCredits) handOutSynth() {
	r.synthOut++
	r.outHdr[tlp.Completion]++
}

// release takes back what the local side consumed. It returns the header
// credits to pass on to the peer: synthesized completions' share is not.
func (r *recvCredits) release(c tlp.Class, headers, data int) (int, error) {
	if c > tlp.Completion || headers < 0 || data < 0 {
		return 0, fmt.Errorf("%w: class %v, %d headers, %d data units", ErrRelease, c, headers, data)
	}
	if headers > r.outHdr[c] || data > r.outData[c] {
		return 0, fmt.Errorf("%w: class %v: releasing %d headers and %d data units, %d and %d are delivered and unreleased",
			ErrRelease, c, headers, data, r.outHdr[c], r.outData[c])
	}
	r.outHdr[c] -= headers
	r.outData[c] -= data
	if c == tlp.Completion && r.synthOut > 0 {
		// Taking the synthesized share first can only under-advertise
		// for a while, never over-advertise.
		k := min(headers, r.synthOut)
		r.synthOut -= k
		headers -= k
	}
	return headers, nil
}

// free returns buffer space of class c to the peer's limits.
func (r *recvCredits) free(c tlp.Class, headers, data int) {
	r.heldHdr[c] -= headers
	r.heldData[c] -= data
	oh, od := min(headers, r.oldHdr[c]), min(data, r.oldData[c])
	r.oldHdr[c] -= oh
	r.oldData[c] -= od
	r.released[hdrType(c)] += uint32(headers - oh)
	r.released[dataType(c)] += uint32(data - od)
}

// check verifies the counts are in range.
func (r *recvCredits) check() error {
	for c := range r.heldHdr {
		if r.heldHdr[c] < 0 || r.heldData[c] < 0 || r.outHdr[c] < 0 || r.outData[c] < 0 {
			return fmt.Errorf("bridge: class %d: negative buffer counts held %d/%d out %d/%d", c, r.heldHdr[c], r.heldData[c], r.outHdr[c], r.outData[c])
		}
		if !r.isInfinite(hdrType(tlp.Class(c))) && r.heldHdr[c] > r.capHdr[c] {
			return fmt.Errorf("bridge: class %d: %d headers held, capacity %d", c, r.heldHdr[c], r.capHdr[c])
		}
		if r.capData[c] != 0 && r.heldData[c] > r.capData[c] {
			return fmt.Errorf("bridge: class %d: %d data units held, capacity %d", c, r.heldData[c], r.capData[c])
		}
	}
	return nil
}
