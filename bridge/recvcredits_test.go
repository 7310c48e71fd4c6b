package bridge

import (
	"errors"
	"testing"
	"time"

	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
)

// TestRecvCredits walks one class's buffer through holding, handing out
// and releasing TLPs, and checks room and the advertised limits.
func TestRecvCredits(t *testing.T) {
	var cfg [NumClasses]ClassCredits
	cfg[tlp.Posted] = ClassCredits{Headers: 2, Data: 8}
	cfg[tlp.Completion] = ClassCredits{} // infinite, InfiniteQueue deep
	r, depth := newRecvCredits(cfg, 5)
	if depth[tlp.Posted] != 2 || depth[tlp.Completion] != 5 {
		t.Fatalf("depths %v", depth)
	}
	if !r.isInfinite(encap.CreditCplH) || !r.isInfinite(encap.CreditCplD) || r.isInfinite(encap.CreditPH) {
		t.Fatalf("infinite mask %#x", r.infinite)
	}
	r.restart()
	steps := []struct {
		name      string
		do        func() error
		roomFor   int // data units asked of room
		room      bool
		ph, pd    uint32 // advertised limits after the step
		wantError bool
	}{
		{"empty", func() error { return nil }, 8, true, 2, 8, false},
		{"hold 4", func() error { r.hold(tlp.Posted, 4); return nil }, 5, false, 2, 8, false},
		{"room for the rest", func() error { return nil }, 4, true, 2, 8, false},
		{"hold 4 more: headers out", func() error { r.hold(tlp.Posted, 4); return nil }, 0, false, 2, 8, false},
		{"hand out one", func() error { r.handOut(tlp.Posted, 4); return nil }, 0, false, 2, 8, false},
		{"release more than handed out", func() error { _, err := r.release(tlp.Posted, 2, 4); return err }, 0, false, 2, 8, true},
		{"release more data than handed out", func() error { _, err := r.release(tlp.Posted, 1, 5); return err }, 0, false, 2, 8, true},
		{"release it", func() error {
			h, err := r.release(tlp.Posted, 1, 4)
			r.free(tlp.Posted, h, 4)
			return err
		}, 4, true, 3, 12, false},
	}
	for _, s := range steps {
		err := s.do()
		if (err != nil) != s.wantError || (err != nil && !errors.Is(err, ErrRelease)) {
			t.Fatalf("%s: error %v", s.name, err)
		}
		if got := r.room(tlp.Posted, s.roomFor); got != s.room {
			t.Fatalf("%s: room(%d) = %v, want %v (held %d/%d)", s.name, s.roomFor, got, s.room, r.heldHdr[tlp.Posted], r.heldData[tlp.Posted])
		}
		if r.limit(encap.CreditPH) != s.ph || r.limit(encap.CreditPD) != s.pd {
			t.Fatalf("%s: limits %d/%d, want %d/%d", s.name, r.limit(encap.CreditPH), r.limit(encap.CreditPD), s.ph, s.pd)
		}
		if err := r.check(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
	// A new session advertises the room left now.
	r.restart()
	if r.limit(encap.CreditPH) != 1 || r.limit(encap.CreditPD) != 4 {
		t.Fatalf("after restart: limits %d/%d, want 1/4", r.limit(encap.CreditPH), r.limit(encap.CreditPD))
	}
	// Synthesized completions' share of a release is not passed on.
	r.handOutSynth()
	r.handOut(tlp.Completion, 0)
	if h, err := r.release(tlp.Completion, 2, 0); err != nil || h != 1 {
		t.Fatalf("release of one synthesized and one real completion passes on %d headers (%v), want 1", h, err)
	}
	if _, err := r.release(tlp.Class(3), 1, 0); !errors.Is(err, ErrRelease) {
		t.Fatalf("release of class 3: %v", err)
	}
}

// A TLP of the old session still held when a session starts takes room
// the new initial credits leave out; freeing it raises no limit, so the
// limits never run ahead of the peer's consumed count by more than the
// initial credits (CRD-4; dxpu conform found this).
func TestRecvCreditsOldSessionHeld(t *testing.T) {
	var cfg [NumClasses]ClassCredits
	cfg[tlp.Completion] = ClassCredits{Headers: 4, Data: 64}
	r, _ := newRecvCredits(cfg, 5)
	r.restart()
	r.hold(tlp.Completion, 1)
	r.restart() // a new session with the TLP still held
	if got, gotD := r.limit(encap.CreditCplH), r.limit(encap.CreditCplD); got != 3 || gotD != 63 {
		t.Fatalf("initial CplH/CplD %d/%d, want 3/63 (one of 4 headers and one of 64 data units held)", got, gotD)
	}
	r.free(tlp.Completion, 1, 1)
	if got := r.limit(encap.CreditCplH); got != 3 {
		t.Errorf("CplH limit %d after the old TLP freed, want 3: 4 would be ahead of the initial credits", got)
	}
	if got := r.limit(encap.CreditCplD); got != 63 {
		t.Errorf("CplD limit %d after the old TLP freed, want 63: 64 would be ahead of the initial credits", got)
	}
	r.hold(tlp.Completion, 1) // a TLP of this session
	r.free(tlp.Completion, 1, 1)
	if got, gotD := r.limit(encap.CreditCplH), r.limit(encap.CreditCplD); got != 4 || gotD != 64 {
		t.Errorf("CplH/CplD limits %d/%d after a new TLP freed, want 4/64", got, gotD)
	}
}

// TestCreditOverrunRefused: CRD-7, SEQ-3: a peer that sends beyond the
// data credits it was given gets the TLP that does not fit refused (not
// held, not acknowledged), though the class has header room left.
func TestCreditOverrunRefused(t *testing.T) {
	gc := Config{MaxPayload: 64}
	gc.Credits[tlp.Posted] = ClassCredits{Headers: 16, Data: 8} // two 64-byte writes
	p := newTestPair(t, Config{MaxPayload: 64}, gc)
	p.up()
	p.accept[1] = 0
	seq := p.g.reorder.next
	for i := range 3 { // forged: a sender that ignores the credits
		f := plainFrame(encap.MsgTLP, 0x123456, seq+uint32(i), 1, tlpBody(enc(mwr(0x1000*uint64(i+1), 64))))
		if err := p.g.HandleFrame(p.now, f); err != nil {
			t.Fatal(err)
		}
		if err := p.g.CheckInvariants(); err != nil {
			t.Fatalf("after write %d: %v", i, err)
		}
	}
	if c := p.g.Counters(); p.g.Queued() != 2 || c.RxOverruns != 1 || p.g.reorder.next != seq+2 {
		t.Fatalf("%d queued, %d overruns, next %#x; want 2, 1, %#x (the third write not accepted)", p.g.Queued(), c.RxOverruns, p.g.reorder.next, seq+2)
	}
}

// TestAutoReleaseReturnsCredits: with AutoRelease a TLP's header and data
// credits return as NextTLP hands it out (CRD-5), so a sender bound by data
// credits keeps going.
func TestAutoReleaseReturnsCredits(t *testing.T) {
	gc := Config{MaxPayload: 64, AutoRelease: true}
	gc.Credits[tlp.Posted] = ClassCredits{Headers: 64, Data: 8} // two 64-byte writes
	p := newTestPair(t, Config{MaxPayload: 64}, gc)
	p.up()
	const writes = 6
	for i := range writes {
		p.send(p.h, mwr(0x1000*uint64(i+1), 64))
	}
	p.advance(2*time.Millisecond, 50*time.Microsecond)
	if len(p.gq) != writes {
		t.Fatalf("delivered %d of %d: the data credits of auto-released writes did not come back", len(p.gq), writes)
	}
}
