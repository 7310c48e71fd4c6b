package bridge

import (
	"testing"
	"time"

	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
)

// TestSendCreditsAllows: a TLP needs a header credit and its data units of
// its own class, unless the peer declared the type infinite; the check
// survives the counters wrapping.
func TestSendCreditsAllows(t *testing.T) {
	np := tlp.NonPosted
	tests := []struct {
		name       string
		limit      [encap.NumCreditTypes]uint32
		consumed   [encap.NumCreditTypes]uint32
		infinite   uint8
		class      tlp.Class
		data       int
		want       bool
		wantAfter  bool // after consuming one such TLP (when allowed)
		afterClass tlp.Class
	}{
		{name: "room for one", limit: creditsOf(np, 1, 4), class: np, data: 4, want: true, wantAfter: false, afterClass: np},
		{name: "header credits out", limit: creditsOf(np, 1, 100), consumed: creditsOf(np, 1, 0), class: np, data: 1, want: false},
		{name: "data credits short by one", limit: creditsOf(np, 5, 3), class: np, data: 4, want: false},
		{name: "no data needs no data credit", limit: creditsOf(np, 1, 0), class: np, data: 0, want: true},
		{name: "another class's credits do not count", limit: creditsOf(tlp.Posted, 10, 100), class: np, data: 1, want: false},
		{name: "infinite headers", limit: creditsOf(np, 0, 8), infinite: 1 << encap.CreditNPH, class: np, data: 4, want: true, wantAfter: true, afterClass: np},
		{name: "infinite data", limit: creditsOf(np, 1, 0), infinite: 1 << encap.CreditNPD, class: np, data: 64, want: true, wantAfter: false, afterClass: np},
		{name: "header counters wrap at 16 bits", limit: creditsOf(np, 0x10001, 8), consumed: creditsOf(np, 0xffff, 0), class: np, data: 4, want: true, wantAfter: true, afterClass: np},
		// CRD-2: (limit - (consumed+1)) mod 2^16 <= 2^15 still allows.
		{name: "header limit 2^15+1 ahead", limit: creditsOf(np, 0x8001, 0), class: np, data: 0, want: true, wantAfter: true, afterClass: np},
		{name: "header limit 2^15+2 ahead reads as behind", limit: creditsOf(np, 0x8002, 0), class: np, data: 0, want: false},
		{name: "data counters wrap at 32 bits", limit: creditsOf(np, 10, 3), consumed: creditsOf(np, 0, 0xfffffffe), class: np, data: 5, want: true, wantAfter: false, afterClass: np},
		{name: "consuming one class leaves another", limit: addCredits(creditsOf(np, 1, 4), creditsOf(tlp.Completion, 1, 4)), class: np, data: 4, want: true, wantAfter: true, afterClass: tlp.Completion},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s sendCredits
			s.start(tc.limit, tc.infinite)
			s.consumed = tc.consumed
			if got := s.allows(tc.class, tc.data); got != tc.want {
				t.Fatalf("allows(%v, %d) = %v, want %v (limit %v consumed %v)", tc.class, tc.data, got, tc.want, s.limit, s.consumed)
			}
			if !tc.want {
				return
			}
			s.consume(tc.class, tc.data)
			if got := s.allows(tc.afterClass, tc.data); got != tc.wantAfter {
				t.Errorf("after one: allows(%v, %d) = %v, want %v (limit %v consumed %v)", tc.afterClass, tc.data, got, tc.wantAfter, s.limit, s.consumed)
			}
		})
	}
}

func creditsOf(c tlp.Class, hdr, data uint32) [encap.NumCreditTypes]uint32 {
	var l [encap.NumCreditTypes]uint32
	l[hdrType(c)], l[dataType(c)] = hdr, data
	return l
}

func addCredits(a, b [encap.NumCreditTypes]uint32) [encap.NumCreditTypes]uint32 {
	for i := range a {
		a[i] += b[i]
	}
	return a
}

// TestSendCreditsUpdate: limits only move forward, never beyond what the
// peer's buffers hold past what was consumed; header limits arrive in 16
// bits.
func TestSendCreditsUpdate(t *testing.T) {
	tests := []struct {
		name      string
		initial   uint32 // the peer's buffers (HELLO credits) of the type
		consumed  uint32
		typ       encap.CreditType
		limit     uint32 // as the frame carries it
		want      uint32
		wantBogus bool
	}{
		{"data forward", 64, 10, encap.CreditPD, 70, 70, false},
		{"data back", 64, 0, encap.CreditPD, 60, 64, false},
		{"data equal", 64, 0, encap.CreditPD, 64, 64, false},
		{"data beyond the buffers", 64, 10, encap.CreditPD, 75, 64, true},
		{"data exactly the buffers", 64, 10, encap.CreditPD, 74, 74, false},
		// All 32 bits count: the same low 16 bits are still a step.
		{"data forward by 2^16 across the wrap", 0xffff0005, 0xfffefffb, encap.CreditCplD, 5, 5, false},
		{"header forward", 8, 3, encap.CreditNPH, 11, 11, false},
		{"header beyond the buffers", 8, 3, encap.CreditNPH, 12, 8, true},
		{"header back (16-bit compare)", 8, 0, encap.CreditCplH, 0xfff0, 8, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s sendCredits
			var init [encap.NumCreditTypes]uint32
			init[tc.typ] = tc.initial
			s.start(init, 0)
			s.consumed[tc.typ] = tc.consumed
			if bogus := s.update(tc.typ, tc.limit); bogus != tc.wantBogus {
				t.Errorf("update(%d, %d): bogus %v, want %v", tc.typ, tc.limit, bogus, tc.wantBogus)
			}
			if s.limit[tc.typ] != tc.want {
				t.Errorf("update(%d, %d): limit %d, want %d", tc.typ, tc.limit, s.limit[tc.typ], tc.want)
			}
		})
	}
	// Infinite types accept any forward step.
	var s sendCredits
	s.start([encap.NumCreditTypes]uint32{}, 1<<encap.CreditPD)
	if s.update(encap.CreditPD, 1<<20) || s.limit[encap.CreditPD] != 1<<20 {
		t.Errorf("infinite PD: limit %d after an update to %d", s.limit[encap.CreditPD], 1<<20)
	}
}

// TestSendCreditsHeaderLimitsLongSession: header limits travel in 16 bits
// while the consumed count runs on in 32; past 2^16 TLPs of a class every
// update still raises the limit, none is taken for a corrupt one, and the
// sender never runs out (CRD-1, CRD-4).
func TestSendCreditsHeaderLimitsLongSession(t *testing.T) {
	const buffers = 4
	var initial [encap.NumCreditTypes]uint32
	initial[encap.CreditPH] = buffers
	var s sendCredits
	s.start(initial, 1<<encap.CreditPD)
	for i := range 3 << 16 {
		if !s.allows(tlp.Posted, 0) {
			t.Fatalf("TLP %d: no header credit (limit %#x, consumed %#x)", i, s.limit[encap.CreditPH], s.consumed[encap.CreditPH])
		}
		s.consume(tlp.Posted, 0)
		// The receiver frees it at once; the frame carries 16 bits.
		l := uint32(uint16(buffers + i + 1))
		if s.update(encap.CreditPH, l) {
			t.Fatalf("TLP %d: limit %#x (consumed %#x) taken for a corrupt one", i, l, s.consumed[encap.CreditPH])
		}
	}
}

// TestCreditStallEachCounted: a class that stalled on credits and then sent
// is no longer stalled: its next stall is counted again, and once
// everything is acknowledged the idle sender probes no more often than
// Keepalive (the stall probes of CRD-6 stop with the stall).
func TestCreditStallEachCounted(t *testing.T) {
	hc := Config{Keepalive: 2 * time.Millisecond, DeadAfter: 20 * time.Millisecond}
	gc := Config{Keepalive: 2 * time.Millisecond, DeadAfter: 20 * time.Millisecond}
	gc.Credits[tlp.Posted] = ClassCredits{Headers: 1, Data: 64}
	p := newTestPair(t, hc, gc)
	p.up()
	for i := range 3 {
		p.send(p.h, mwr(0x1000*uint64(i+1), 64)) // the second and third wait
	}
	p.advance(time.Millisecond, 10*time.Microsecond)
	if len(p.gq) != 3 {
		t.Fatalf("delivered %d of 3", len(p.gq))
	}
	if got := p.h.Counters().CreditStalls[tlp.Posted]; got != 2 {
		t.Errorf("%d posted credit stalls counted, want 2 (one per write that waited)", got)
	}
	if p.h.credits.anyStalled() {
		t.Error("still stalled with nothing queued")
	}
	before := p.h.Counters().KeepalivesSent
	p.advance(10*time.Millisecond, 10*time.Microsecond)
	if got := p.h.Counters().KeepalivesSent - before; got > 6 {
		t.Fatalf("idle sender sent %d KEEPALIVEs in 10 ms, Keepalive is 2 ms", got)
	}
}

// TestSenderRespectsCredits: with the GPU side draining nothing, the host
// side sends posted writes only as far as the GPU side's header and data
// credits reach; the rest wait (a credit stall) and go once released.
func TestSenderRespectsCredits(t *testing.T) {
	tests := []struct {
		name    string
		credits ClassCredits
		payload int
		fits    int
	}{
		{"data credits bind", ClassCredits{Headers: 16, Data: 8}, 64, 2},   // 4 units each
		{"header credits bind", ClassCredits{Headers: 3, Data: 64}, 16, 3}, // 1 unit each
		{"both bind at once", ClassCredits{Headers: 2, Data: 8}, 64, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gc := Config{MaxPayload: 64}
			gc.Credits[tlp.Posted] = tc.credits
			p := newTestPair(t, Config{MaxPayload: 64}, gc)
			p.up()
			p.accept[1] = 0
			const writes = 6
			for i := 0; i < writes; i++ {
				p.send(p.h, mwr(0x1000*uint64(i+1), tc.payload))
			}
			p.advance(time.Millisecond, 50*time.Microsecond)
			hc, gctr := p.h.Counters(), p.g.Counters()
			if hc.TLPsSent != uint64(tc.fits) {
				t.Fatalf("host sent %d writes, credits allow %d", hc.TLPsSent, tc.fits)
			}
			if gctr.RxOverruns != 0 || p.g.Queued() != tc.fits {
				t.Fatalf("GPU side: %d overruns, %d queued; want 0 and %d", gctr.RxOverruns, p.g.Queued(), tc.fits)
			}
			if hc.CreditStalls[tlp.Posted] == 0 || p.h.Pending() != writes-tc.fits {
				t.Fatalf("host: %d posted credit stalls, %d pending; want a stall and %d", hc.CreditStalls[tlp.Posted], p.h.Pending(), writes-tc.fits)
			}
			p.accept[1] = AcceptAll
			p.advance(time.Millisecond, 50*time.Microsecond)
			if len(p.gq) != writes {
				t.Fatalf("delivered %d of %d once released", len(p.gq), writes)
			}
			for i, d := range p.gq {
				if got, want := d.v().Address(), 0x1000*uint64(i+1); got != want {
					t.Fatalf("write %d: address %#x, want %#x", i, got, want)
				}
			}
			if p.g.Counters().RxOverruns != 0 {
				t.Fatalf("GPU side refused %d TLPs for want of buffers", p.g.Counters().RxOverruns)
			}
		})
	}
}

// TestLinkDownClearsCreditStall: a class stalled on credits when the link
// goes down is not stalled in the next session (its queue was emptied):
// the new session neither probes for credits nor misses counting its next
// stall.
func TestLinkDownClearsCreditStall(t *testing.T) {
	hc := Config{Keepalive: 2 * time.Millisecond, DeadAfter: 20 * time.Millisecond}
	gc := Config{Keepalive: 2 * time.Millisecond, DeadAfter: 20 * time.Millisecond}
	gc.Credits[tlp.Posted] = ClassCredits{Headers: 1, Data: 64}
	p := newTestPair(t, hc, gc)
	p.up()
	p.accept[1] = 0
	p.send(p.h, mwr(0x1000, 64))
	p.send(p.h, mwr(0x2000, 64)) // stalls
	p.advance(200*time.Microsecond, 10*time.Microsecond)
	if !p.h.credits.anyStalled() {
		t.Fatal("not stalled")
	}
	p.h.Reset(p.now)
	p.accept[1] = AcceptAll
	p.advance(3*time.Millisecond, 50*time.Microsecond)
	if p.h.State() != StateUp || p.g.State() != StateUp {
		t.Fatalf("states %v/%v after the reset", p.h.State(), p.g.State())
	}
	if p.h.credits.anyStalled() {
		t.Fatal("the new session starts stalled with nothing queued")
	}
	before := p.h.Counters().KeepalivesSent
	p.advance(10*time.Millisecond, 10*time.Microsecond)
	if got := p.h.Counters().KeepalivesSent - before; got > 6 {
		t.Fatalf("idle sender sent %d KEEPALIVEs in 10 ms, Keepalive is 2 ms", got)
	}
}
