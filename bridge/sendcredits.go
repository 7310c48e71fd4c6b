package bridge

import (
	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
)

// sendCredits is the sender's ledger of the credits the peer granted, per
// credit type (a header and a data type per class): the cumulative limit
// the peer advertised, what this side consumed, and which types the peer
// declared infinite. A TLP goes out only when its class has a header
// credit and its ceil(payload/16) data credits, checked as PCIe does:
// (limit - (consumed+need)) mod 2^N <= 2^(N-1), N = 16 for headers (their
// limits travel in 16 bits) and 32 for data.
type sendCredits struct {
	limit    [encap.NumCreditTypes]uint32
	capacity [encap.NumCreditTypes]uint32 // the peer's buffers, from its HELLO: no limit runs further ahead
	infinite uint8                        // bit t: type t is infinite
	consumed [encap.NumCreditTypes]uint32
	stalled  [NumClasses]bool // the class's head waits for credits
}

// start takes the peer's initial credits (its HELLO) for a new session.
func (s *sendCredits) start(initial [encap.NumCreditTypes]uint32, infinite uint8) {
	s.limit, s.capacity, s.infinite = initial, initial, infinite
	s.consumed = [encap.NumCreditTypes]uint32{}
}

func (s *sendCredits) isInfinite(t encap.CreditType) bool { return s.infinite&(1<<t) != 0 }

// allows reports whether the peer has room for one TLP of class c carrying
// data data units.
func (s *sendCredits) allows(c tlp.Class, data int) bool {
	ht, dt := hdrType(c), dataType(c)
	if !s.isInfinite(ht) && uint16(s.limit[ht]-s.consumed[ht]-1) > 0x8000 {
		return false
	}
	dc := uint32(data)
	if dc > 0 && !s.isInfinite(dt) && s.limit[dt]-s.consumed[dt]-dc > 1<<31 {
		return false
	}
	return true
}

// consume takes the credits of one TLP of class c sent with data units.
func (s *sendCredits) consume(c tlp.Class, data int) {
	s.consumed[hdrType(c)]++
	s.consumed[dataType(c)] += uint32(data)
	s.stalled[c] = false
}

// stall records that the head of class c waits for credits; it reports
// whether this is the start of a stall (to count it once).
func (s *sendCredits) stall(c tlp.Class) bool {
	if s.stalled[c] {
		return false
	}
	s.stalled[c] = true
	return true
}

// anyStalled reports whether some class waits for credits.
func (s *sendCredits) anyStalled() bool {
	for _, st := range s.stalled {
		if st {
			return true
		}
	}
	return false
}

// update takes the peer's cumulative limit l of type t from a frame.
// Frames may arrive out of order, so a limit only ever moves forward. A
// limit can never run further ahead of what this side consumed than the
// peer's buffers hold: one that does is corrupt or forged (reported by
// bogus true and ignored), and accepting it would be permanent, since
// later true limits would look like steps back. Header limits travel in 16
// bits and are extended with the high bits of the current limit.
func (s *sendCredits) update(t encap.CreditType, l uint32) (bogus bool) {
	// Most frames repeat the current limit: that check inlines.
	return l != s.limit[t]&wireMask[t] && s.advance(t, l)
}

// wireMask keeps the bits of a limit that a frame carries, per type: 16
// for headers, 32 for data.
var wireMask = [encap.NumCreditTypes]uint32{
	encap.CreditPH: 0xffff, encap.CreditPD: 0xffffffff,
	encap.CreditNPH: 0xffff, encap.CreditNPD: 0xffffffff,
	encap.CreditCplH: 0xffff, encap.CreditCplD: 0xffffffff,
}

// advance is update for a limit that differs from the current one.
func (s *sendCredits) advance(t encap.CreditType, l uint32) (bogus bool) {
	if t == encap.CreditPH || t == encap.CreditNPH || t == encap.CreditCplH {
		if int16(uint16(l)-uint16(s.limit[t])) <= 0 {
			return false
		}
		if !s.isInfinite(t) && uint16(l)-uint16(s.consumed[t]) > uint16(s.capacity[t]) {
			return true
		}
		s.limit[t] = s.limit[t]&^0xffff | l
		return false
	}
	if int32(l-s.limit[t]) <= 0 {
		return false
	}
	if !s.isInfinite(t) && l-s.consumed[t] > s.capacity[t] {
		return true
	}
	s.limit[t] = l
	return false
}
