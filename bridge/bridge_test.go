package bridge

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
)

func TestHandshake(t *testing.T) {
	p := newTestPair(t, Config{}, Config{})
	if err := p.h.HandleTLP(0, enc(mwr(0x1000, 64))); !errors.Is(err, ErrNotUp) {
		t.Fatalf("before the handshake: got %v, want ErrNotUp", err)
	}
	p.up()
	for _, evs := range [][]Event{p.hev, p.gev} {
		if len(evs) != 1 || evs[0].Kind != EventLinkUp {
			t.Fatalf("events %v, want one link-up", evs)
		}
	}
}

func enc(p tlp.Packet) []byte {
	b, err := p.AppendTo(nil)
	if err != nil {
		panic(err)
	}
	return b
}

func TestPostedInOrderAcrossBatches(t *testing.T) {
	p := newTestPair(t, Config{}, Config{})
	p.up()
	for i := 0; i < 40; i++ {
		p.send(p.h, mwr(0x1000+uint64(i)*0x100, 128))
	}
	p.run()
	if len(p.gq) != 40 {
		t.Fatalf("delivered %d, want 40", len(p.gq))
	}
	for i, d := range p.gq {
		if got := d.v().Address(); got != 0x1000+uint64(i)*0x100 {
			t.Fatalf("TLP %d: address %#x", i, got)
		}
	}
	c := p.h.Counters()
	if c.FramesSent >= 40 {
		t.Errorf("%d frames for 40 TLPs: no batching", c.FramesSent)
	}
}

// Posted writes pass a non-posted request stalled on credits; a completion
// does not pass a posted write stalled on credits unless it has RO.
func TestOrderingRules(t *testing.T) {
	gc := Config{}
	gc.Credits[tlp.NonPosted] = ClassCredits{Headers: 1, Data: 64}
	gc.Credits[tlp.Posted] = ClassCredits{Headers: 2, Data: 64}
	p := newTestPair(t, Config{}, gc)
	p.up()
	// The GPU side consumes nothing for now: credits stay in use.
	p.accept[1] = 0
	p.send(p.h, mrd(hostRC, 1, 0x2000, 64))
	p.send(p.h, mrd(hostRC, 2, 0x3000, 64)) // stalls: one NP header credit
	p.send(p.h, mwr(0x4000, 64))            // must pass it
	p.run()
	c := p.h.Counters()
	if c.CreditStalls[tlp.NonPosted] == 0 {
		t.Fatalf("no NP credit stall counted: %+v", c)
	}
	if got := p.g.Queued(); got != 2 {
		t.Fatalf("GPU side holds %d TLPs, want MRd and MWr", got)
	}
	p.accept[1] = AcceptAll
	p.advance(100*time.Microsecond, 10*time.Microsecond) // credit updates ride after AckDelay
	var kinds []string
	for _, d := range p.gq {
		kinds = append(kinds, d.v().Kind().String())
	}
	if strings.Join(kinds, ",") != "MRd,MWr,MRd" {
		t.Fatalf("GPU side got %v, want the MWr before the stalled MRd", kinds)
	}

	// Completions: the GPU answers the two reads while the host side stops
	// draining posted writes, so GPU->host posted credits run out.
	hc := Config{}
	hc.Credits[tlp.Posted] = ClassCredits{Headers: 1, Data: 64}
	p = newTestPair(t, hc, Config{})
	p.up()
	p.send(p.h, mrd(hostRC, 1, 0x2000, 4))
	p.send(p.h, mrd(hostRC, 2, 0x3000, 4))
	p.run()
	if len(p.gq) != 2 {
		t.Fatalf("GPU side got %d reads", len(p.gq))
	}
	r1, r2 := p.gq[0].v(), p.gq[1].v()
	p.accept[0] = 0              // host side drains nothing
	p.send(p.g, mwr(0x5000, 64)) // takes the one PH credit
	p.send(p.g, mwr(0x6000, 64)) // stalls
	c1 := cpld(gpuFn, r1.RequesterID(), r1.Tag(), 4, 0, []byte{1, 2, 3, 4})
	p.send(p.g, c1) // may not pass the stalled write
	c2 := cpld(gpuFn, r2.RequesterID(), r2.Tag(), 4, 0, []byte{5, 6, 7, 8})
	c2.Attr = tlp.AttrRO
	p.send(p.g, c2) // RO: may pass
	p.run()
	// The host side holds what crossed: the first write and the RO completion.
	p.accept[0] = AcceptCompletion
	p.run()
	if len(p.hq) != 1 || p.hq[0].v().Kind() != tlp.CplD || p.hq[0].v().Tag() != 2 {
		t.Fatalf("host side accepted only completions and got %d TLPs (want the RO completion for tag 2)", len(p.hq))
	}
	p.accept[0] = AcceptAll
	p.advance(200*time.Microsecond, 10*time.Microsecond)
	var order []string
	for _, d := range p.hq[1:] {
		v := d.v()
		if v.Kind() == tlp.MWr {
			order = append(order, "MWr")
		} else {
			order = append(order, "Cpl"+string('0'+byte(v.Tag())))
		}
	}
	if strings.Join(order, ",") != "MWr,MWr,Cpl1" {
		t.Fatalf("host side then got %v, want MWr,MWr,Cpl1", order)
	}
}

func TestIDTranslationAndType1(t *testing.T) {
	gpuLocal := tlp.NewID(0x41, 0, 0)
	gpuRootPort := tlp.NewID(0x40, 0, 0)
	hc := Config{ConvertType1: true, DownstreamBus: 3, PeerID: gpuFn}
	gc := Config{IDMap: []IDMapping{{Local: gpuLocal, Wire: gpuFn}, {Local: gpuRootPort, Wire: hostRC}}, PeerID: gpuRootPort}
	p := newTestPair(t, hc, gc)
	p.up()
	p.send(p.h, tlp.Packet{Kind: tlp.CfgRd1, RequesterID: hostRC, Tag: 7, FirstBE: 0xf, Length: 1, TargetID: gpuFn, Register: 0x10})
	p.run()
	if len(p.gq) != 1 {
		t.Fatalf("GPU side got %d TLPs", len(p.gq))
	}
	v := p.gq[0].v()
	if v.Kind() != tlp.CfgRd0 || v.TargetID() != gpuLocal || v.RequesterID() != gpuRootPort {
		t.Fatalf("GPU side got %v target %v requester %v; want CfgRd0 to %v from %v", v.Kind(), v.TargetID(), v.RequesterID(), gpuLocal, gpuRootPort)
	}
	p.send(p.g, tlp.Packet{Kind: tlp.CplD, CompleterID: gpuLocal, RequesterID: v.RequesterID(), Tag: v.Tag(), ByteCount: 4, Data: []byte{0xde, 0x10, 0, 0}})
	p.run()
	if len(p.hq) != 1 {
		t.Fatalf("host side got %d TLPs", len(p.hq))
	}
	c := p.hq[0].v()
	if c.CompleterID() != gpuFn || c.RequesterID() != hostRC || c.Tag() != 7 {
		t.Fatalf("host side completion: completer %v requester %v tag %d", c.CompleterID(), c.RequesterID(), c.Tag())
	}
	// And the GPU's own DMA read: requester translated on the way out.
	p.send(p.g, mrd(gpuLocal, 9, 0x8000, 4))
	p.run()
	if r := p.hq[1].v(); r.RequesterID() != gpuFn {
		t.Fatalf("host side sees the GPU's read from %v, want %v", r.RequesterID(), gpuFn)
	}
}

// TestIDRoutedMessageTranslated: a message routed by ID has its target
// ID mapped like a config request's, both ways.
func TestIDRoutedMessageTranslated(t *testing.T) {
	gpuLocal := tlp.NewID(0x41, 0, 0)
	gpuRootPort := tlp.NewID(0x40, 0, 0)
	gc := Config{IDMap: []IDMapping{{Local: gpuLocal, Wire: gpuFn}, {Local: gpuRootPort, Wire: hostRC}}}
	p := newTestPair(t, Config{}, gc)
	p.up()
	vdm := func(req, target tlp.ID) tlp.Packet {
		return tlp.Packet{Kind: tlp.Msg, RequesterID: req, MessageCode: 0x7f, Routing: tlp.RouteByID, TargetID: target}
	}
	p.send(p.h, vdm(hostRC, gpuFn))
	p.run()
	if len(p.gq) != 1 {
		t.Fatalf("GPU side got %d TLPs", len(p.gq))
	}
	if v := p.gq[0].v(); v.TargetID() != gpuLocal || v.RequesterID() != gpuRootPort {
		t.Fatalf("GPU side got a message to %v from %v; want to %v from %v", v.TargetID(), v.RequesterID(), gpuLocal, gpuRootPort)
	}
	p.send(p.g, vdm(gpuLocal, gpuRootPort))
	p.run()
	if len(p.hq) != 1 {
		t.Fatalf("host side got %d TLPs", len(p.hq))
	}
	if v := p.hq[0].v(); v.TargetID() != hostRC || v.RequesterID() != gpuFn {
		t.Fatalf("host side got a message to %v from %v; want to %v from %v", v.TargetID(), v.RequesterID(), hostRC, gpuFn)
	}
}

func TestTagSpaces(t *testing.T) {
	for _, bits := range []int{8, 10} {
		p := newTestPair(t, Config{TagBits: 10}, Config{TagBits: bits})
		p.up()
		// The host's requester uses 10-bit tags.
		for i := 0; i < 250; i++ {
			p.send(p.h, mrd(hostRC, uint16(300+i), 0x1000*uint64(i), 4))
			if i%32 == 0 {
				p.advance(50*time.Microsecond, 10*time.Microsecond)
			}
		}
		p.advance(50*time.Microsecond, 10*time.Microsecond)
		if len(p.gq) != 250 {
			t.Fatalf("%d-bit peer: %d of 250 requests arrived", bits, len(p.gq))
		}
		seen := map[uint16]bool{}
		for _, d := range p.gq {
			w := d.v().Tag()
			lo, n := tagSpace(bits)
			if int(w) < lo || int(w) >= lo+n {
				t.Fatalf("%d-bit peer: wire tag %d outside %d..%d", bits, w, lo, lo+n-1)
			}
			if seen[w] {
				t.Fatalf("%d-bit peer: wire tag %d used twice while outstanding", bits, w)
			}
			seen[w] = true
		}
		// Answer them all; the host sees its own tags again.
		for _, d := range p.gq {
			v := d.v()
			p.send(p.g, cpld(gpuFn, v.RequesterID(), v.Tag(), 4, 0, []byte{1, 2, 3, 4}))
			p.advance(10*time.Microsecond, 10*time.Microsecond)
		}
		got := map[uint16]bool{}
		for _, d := range p.hq {
			got[d.v().Tag()] = true
		}
		for i := 0; i < len(p.gq); i++ {
			if !got[uint16(300+i)] {
				t.Fatalf("%d-bit peer: host never got a completion for its tag %d", bits, 300+i)
			}
		}
		if p.h.Outstanding() != 0 {
			t.Fatalf("%d-bit peer: %d still outstanding", bits, p.h.Outstanding())
		}
	}
}

func TestTagExhaustionIsBusy(t *testing.T) {
	p := newTestPair(t, Config{}, Config{TagBits: 8})
	p.up()
	for i := 0; i < 256; i++ {
		p.send(p.h, mrd(hostRC, uint16(i), 0, 4))
		p.run()
	}
	err := p.h.HandleTLP(p.now, enc(mrd(hostRC, 1, 0, 4)))
	if !errors.Is(err, ErrBusy) || p.h.Counters().TagStalls != 1 {
		t.Fatalf("257th request: %v, stalls %d", err, p.h.Counters().TagStalls)
	}
}

func TestCompletionTimeoutAndLateCompletion(t *testing.T) {
	p := newTestPair(t, Config{CompletionTimeout: 5 * time.Millisecond, PeerID: gpuFn}, Config{})
	p.up()
	p.send(p.h, mrd(hostRC, 33, 0x1004, 64))
	p.run()
	req := p.gq[0].v()
	p.advance(6*time.Millisecond, 500*time.Microsecond)
	if len(p.hq) != 1 {
		t.Fatalf("host side got %d TLPs, want the CA completion", len(p.hq))
	}
	ca := p.hq[0].v()
	if ca.Kind() != tlp.Cpl || ca.Status() != tlp.StatusCA || ca.Tag() != 33 || ca.RequesterID() != hostRC || ca.CompleterID() != gpuFn || ca.ByteCount() != 64 || ca.LowerAddress() != 4 {
		t.Fatalf("synthesized %v status %v tag %d req %v cpl %v bc %d la %d", ca.Kind(), ca.Status(), ca.Tag(), ca.RequesterID(), ca.CompleterID(), ca.ByteCount(), ca.LowerAddress())
	}
	found := false
	for _, e := range p.hev {
		found = found || (e.Kind == EventCompletionTimeout && e.Tag == 33)
	}
	if !found {
		t.Fatal("no completion-timeout event")
	}
	// The real completion arrives late: dropped, the host sees nothing more.
	p.send(p.g, cpld(gpuFn, req.RequesterID(), req.Tag(), 64, 4, make([]byte, 64)))
	p.run()
	if len(p.hq) != 1 || p.h.Counters().LateCompletions != 1 {
		t.Fatalf("late completion delivered (%d TLPs) or not counted (%d)", len(p.hq), p.h.Counters().LateCompletions)
	}
	if c := p.h.Counters(); c.CompletionTimeouts != 1 || c.SynthesizedCA != 1 {
		t.Fatalf("counters %+v", c)
	}
}

func TestSplitCompletionsAccounted(t *testing.T) {
	p := newTestPair(t, Config{}, Config{})
	p.up()
	p.send(p.h, mrd(hostRC, 5, 0x10000, 256))
	p.run()
	req := p.gq[0].v()
	sp, err := tlp.SplitterFor(req, 128, 64)
	if err != nil {
		t.Fatal(err)
	}
	parts := 0
	for {
		part, ok := sp.Next()
		if !ok {
			break
		}
		parts++
		if p.h.Outstanding() != 1 {
			t.Fatalf("request closed after %d of the completions", parts-1)
		}
		p.send(p.g, cpld(gpuFn, req.RequesterID(), req.Tag(), part.ByteCount, part.LowerAddress, make([]byte, part.Length*4)))
		p.run()
	}
	if parts < 2 || p.h.Outstanding() != 0 || len(p.hq) != parts {
		t.Fatalf("%d parts, %d outstanding, %d delivered", parts, p.h.Outstanding(), len(p.hq))
	}
	for i, d := range p.hq { // every part carries the requester's own tag
		if v := d.v(); v.Tag() != 5 || v.RequesterID() != hostRC {
			t.Fatalf("completion %d of %d: tag %d requester %v, want 5 %v", i+1, parts, v.Tag(), v.RequesterID(), hostRC)
		}
	}
	// One more completion for the same request: no request matches.
	p.send(p.g, cpld(gpuFn, req.RequesterID(), req.Tag(), 4, 0, make([]byte, 4)))
	p.run()
	if len(p.hq) != parts || p.g.Counters().UnmatchedCompletions != 1 {
		t.Fatalf("extra completion: delivered %d, GPU unmatched %d", len(p.hq), p.g.Counters().UnmatchedCompletions)
	}
}

func TestUnmatchedCompletionFromFabricDropped(t *testing.T) {
	p := newTestPair(t, Config{}, Config{})
	p.up()
	// Forge a frame carrying a completion the host never asked for.
	raw := enc(cpld(gpuFn, hostRC, 77, 4, 0, []byte{1, 2, 3, 4}))
	f := make([]byte, encap.HeaderLen+2+len(raw))
	h := encap.Header(f)
	h.SetVersionFlags(encap.Version, 0)
	h.SetType(encap.MsgTLP)
	h.SetPairID(0x123456)
	h.SetCount(1)
	h.SetBodyLen(2 + len(raw))
	h.SetSeq(p.h.reorder.next)
	f[encap.HeaderLen], f[encap.HeaderLen+1] = 0, byte(len(raw))
	copy(f[encap.HeaderLen+2:], raw)
	if err := p.h.HandleFrame(p.now, f); err != nil {
		t.Fatal(err)
	}
	p.run()
	if len(p.hq) != 0 || p.h.Counters().UnmatchedCompletions != 1 {
		t.Fatalf("delivered %d, unmatched %d", len(p.hq), p.h.Counters().UnmatchedCompletions)
	}
	// Its credits came back at once.
	if p.h.buffers.heldHdr[tlp.Completion] != 0 {
		t.Fatalf("held %d completion headers", p.h.buffers.heldHdr[tlp.Completion])
	}
}

func TestDuplicateAndForeignFrames(t *testing.T) {
	p := newTestPair(t, Config{}, Config{})
	p.up()
	var first []byte
	p.drop = func(from *Bridge, f []byte) bool {
		if from == p.h && encap.Header(f).Type() == encap.MsgTLP && first == nil {
			first = append([]byte(nil), f...)
		}
		return false
	}
	p.send(p.h, mwr(0x1000, 64))
	p.run()
	if err := p.g.HandleFrame(p.now, first); err != nil {
		t.Fatal(err)
	}
	p.run()
	if len(p.gq) != 1 || p.g.Counters().Duplicates != 1 {
		t.Fatalf("duplicate frame: delivered %d, duplicates %d", len(p.gq), p.g.Counters().Duplicates)
	}
	other := append([]byte(nil), first...)
	encap.Header(other).SetPairID(0x654321)
	if err := p.g.HandleFrame(p.now, other); !errors.Is(err, ErrFrame) || !strings.Contains(err.Error(), "pair") {
		t.Fatalf("foreign pair: %v", err)
	}
	bad := append([]byte(nil), first...)
	encap.Header(bad).SetAck(p.g.retx.nxt + 1000)
	encap.Header(bad).SetVersionFlags(encap.Version, encap.FlagAck)
	if err := p.g.HandleFrame(p.now, bad); !errors.Is(err, ErrFrame) || !strings.Contains(err.Error(), "ack") {
		t.Fatalf("ack from the future: %v", err)
	}
	if err := p.g.HandleFrame(p.now, first[:20]); !errors.Is(err, ErrFrame) {
		t.Fatalf("short frame: %v", err)
	}
	if p.g.Counters().FramesDropped != 3 {
		t.Fatalf("FramesDropped %d", p.g.Counters().FramesDropped)
	}
}

func TestLossRecoveredAndRTTMeasured(t *testing.T) {
	p := newTestPair(t, Config{}, Config{})
	p.up()
	n := 0
	p.drop = func(from *Bridge, f []byte) bool {
		if from == p.h && encap.Header(f).Type() == encap.MsgTLP {
			n++
			return n%3 == 0 // every third TLP frame is lost
		}
		return false
	}
	for i := 0; i < 30; i++ {
		p.send(p.h, mwr(uint64(i)*0x1000, 512))
		p.run()
	}
	p.advance(20*time.Millisecond, 50*time.Microsecond)
	if len(p.gq) != 30 {
		t.Fatalf("delivered %d of 30", len(p.gq))
	}
	for i, d := range p.gq {
		if d.v().Address() != uint64(i)*0x1000 {
			t.Fatalf("TLP %d out of order", i)
		}
	}
	if c := p.h.Counters(); c.Retransmits == 0 {
		t.Fatalf("no retransmissions counted: %+v", c)
	}
}

func TestLinkDownAndReset(t *testing.T) {
	p := newTestPair(t, Config{DeadAfter: 3 * time.Millisecond, PeerID: gpuFn}, Config{DeadAfter: 3 * time.Millisecond})
	p.up()
	p.send(p.h, mrd(hostRC, 1, 0x1000, 64))
	p.send(p.h, mrd(hostRC, 2, 0x2000, 64))
	p.run()
	oldSession := p.h.Session()
	cut := true
	p.drop = func(*Bridge, []byte) bool { return cut }
	p.send(p.h, mwr(0xA000, 64))
	p.send(p.h, mwr(0xB000, 64))
	p.send(p.h, mrd(hostRC, 3, 0x3000, 64))
	p.run()
	p.advance(4*time.Millisecond, 250*time.Microsecond)
	if p.h.State() != StateDown || p.g.State() != StateDown {
		t.Fatalf("states %v/%v after silence", p.h.State(), p.g.State())
	}
	urs := 0
	for _, d := range p.hq {
		if v := d.v(); v.Kind() == tlp.Cpl && v.Status() == tlp.StatusUR {
			urs++
		}
	}
	if urs != 3 {
		t.Fatalf("%d UR completions for 3 outstanding requests", urs)
	}
	var kinds []EventKind
	var lost []uint64
	for _, e := range p.hev {
		kinds = append(kinds, e.Kind)
		if e.Kind == EventPostedLost {
			lost = append(lost, e.Addrs...)
		}
	}
	if len(lost) != 2 || lost[0] != 0xA000 || lost[1] != 0xB000 {
		t.Fatalf("lost writes %#x, want 0xA000 0xB000 (events %v)", lost, kinds)
	}
	if !hasKind(p.hev, EventSurpriseRemoval) || hasKind(p.gev, EventSurpriseRemoval) || !hasKind(p.gev, EventLinkDown) {
		t.Fatalf("host events %v, gpu events %v", p.hev, p.gev)
	}
	// New requests while down: UR at once.
	p.send(p.h, mrd(hostRC, 4, 0x4000, 4))
	p.run()
	if v := p.hq[len(p.hq)-1].v(); v.Status() != tlp.StatusUR || v.Tag() != 4 {
		t.Fatalf("request while down answered %v tag %d", v.Status(), v.Tag())
	}
	// The link comes back: a new session, traffic flows, nothing old leaks.
	cut = false
	p.advance(3*time.Millisecond, 100*time.Microsecond)
	if p.h.State() != StateUp || p.g.State() != StateUp || p.h.Session() == oldSession {
		t.Fatalf("after the flap: %v/%v session %#x (old %#x)", p.h.State(), p.g.State(), p.h.Session(), oldSession)
	}
	before := len(p.gq)
	p.send(p.h, mwr(0xC000, 64))
	p.run()
	if len(p.gq) != before+1 || p.gq[before].v().Address() != 0xC000 {
		t.Fatalf("no traffic after the flap")
	}

	// Explicit reset: both sides tear down and handshake again.
	p.h.Reset(p.now)
	p.run()
	if !hasKind(p.gev[len(p.gev)-3:], EventLinkDown) {
		t.Fatalf("GPU side did not see the reset: %v", p.gev)
	}
	p.advance(3*time.Millisecond, 100*time.Microsecond)
	if p.h.State() != StateUp || p.g.State() != StateUp {
		t.Fatalf("after reset: %v/%v", p.h.State(), p.g.State())
	}
}

// LNK-6: a RESET naming a session other than the receiver's own (a late
// one from before the last handshake) is ignored.
func TestStaleResetIgnored(t *testing.T) {
	p := newTestPair(t, Config{}, Config{})
	p.up()
	var reset []byte
	p.drop = func(from *Bridge, f []byte) bool {
		h := encap.Header(f)
		if from == p.h && h.Type() == encap.MsgControl && reset == nil {
			if c, err := encap.ParseControl(h.Body()); err == nil && c.Type == encap.CtlReset {
				reset = append([]byte(nil), f...)
			}
		}
		return false
	}
	p.h.Reset(p.now)
	p.run()
	p.advance(3*time.Millisecond, 100*time.Microsecond)
	if reset == nil || p.h.State() != StateUp || p.g.State() != StateUp {
		t.Fatalf("RESET sent %v; states %v/%v after it", reset != nil, p.h.State(), p.g.State())
	}
	session, downs := p.g.Session(), p.g.Counters().LinkDowns
	if err := p.g.HandleFrame(p.now, reset); err != nil {
		t.Fatal(err)
	}
	p.run()
	if p.g.State() != StateUp || p.g.Session() != session || p.g.Counters().LinkDowns != downs {
		t.Fatalf("the previous session's RESET tore the GPU side's session down (%v, session %#x, was %#x)", p.g.State(), p.g.Session(), session)
	}
}

func hasKind(evs []Event, k EventKind) bool {
	for _, e := range evs {
		if e.Kind == k {
			return true
		}
	}
	return false
}

// A short outage (under DeadAfter) resumes without loss or duplication.
func TestShortFlapResumes(t *testing.T) {
	p := newTestPair(t, Config{}, Config{})
	p.up()
	cut := false
	p.drop = func(*Bridge, []byte) bool { return cut }
	for i := 0; i < 10; i++ {
		p.send(p.h, mwr(uint64(i)*0x1000, 64))
	}
	cut = true
	p.run()
	p.advance(5*time.Millisecond, 200*time.Microsecond)
	cut = false
	p.advance(30*time.Millisecond, 200*time.Microsecond)
	if len(p.gq) != 10 || len(p.hev) != 1 {
		t.Fatalf("delivered %d, host events %v", len(p.gq), p.hev)
	}
}

func TestConfigErrors(t *testing.T) {
	cases := map[string]Config{
		"Role":       {},
		"PairID":     {Role: RoleHost, PairID: 1 << 24},
		"MTU":        {Role: RoleHost, MTU: 100},
		"TagBits":    {Role: RoleHost, TagBits: 9},
		"MaxPayload": {Role: RoleHost, MaxPayload: 6},
		"IDMap":      {Role: RoleHost, IDMap: []IDMapping{{1, 2}, {1, 3}}},
		"DeadAfter":  {Role: RoleHost, Keepalive: time.Second},
		// Keyed or not: a negative time is a mistake either way.
		"RekeyGraceTime": {Role: RoleHost, RekeyGraceTime: -time.Millisecond},
	}
	for field, c := range cases {
		_, err := New(c)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v", field, err)
		}
	}
}

func TestMalformedTLPRefused(t *testing.T) {
	p := newTestPair(t, Config{MaxPayload: 128, MTU: 1472}, Config{})
	p.up()
	if err := p.h.HandleTLP(p.now, []byte{0x40, 0, 0}); !errors.Is(err, ErrMalformedTLP) {
		t.Fatalf("short TLP: %v", err)
	}
	big := enc(mwr(0, 256))
	if err := p.h.HandleTLP(p.now, big); !errors.Is(err, ErrMalformedTLP) || errors.Is(err, ErrPeerTLPSize) || !strings.Contains(err.Error(), "MaxPayload") {
		t.Fatalf("oversized TLP: %v", err)
	}
}

func TestReleaseErrors(t *testing.T) {
	p := newTestPair(t, Config{}, Config{})
	p.up()
	if err := p.g.Release(tlp.Posted, 1, 0); !errors.Is(err, ErrRelease) {
		t.Fatalf("release with nothing delivered: %v", err)
	}
}

// TLPs with an ECRC digest stay valid after the bridge rewrites their tag
// and IDs (the digest is recomputed; the receiver checks it).
func TestECRCRecomputed(t *testing.T) {
	gc := Config{TagBits: 8, IDMap: []IDMapping{{Local: tlp.NewID(0x41, 0, 0), Wire: gpuFn}}}
	p := newTestPair(t, Config{TagBits: 10}, gc)
	p.up()
	r := mrd(hostRC, 700, 0x1000, 64)
	r.TD = true
	p.send(p.h, r)
	w := mwr(0x2000, 64)
	w.TD = true
	p.send(p.h, w)
	p.run()
	if len(p.gq) != 2 {
		t.Fatalf("GPU side got %d TLPs (frames dropped: %d)", len(p.gq), p.g.Counters().FramesDropped)
	}
	for _, d := range p.gq {
		if _, err := tlp.Parse(d.v()); err != nil {
			t.Fatalf("delivered TLP does not parse: %v", err)
		}
	}
	req := p.gq[0].v()
	c := cpld(tlp.NewID(0x41, 0, 0), req.RequesterID(), req.Tag(), 64, 0, make([]byte, 64))
	c.TD = true
	p.send(p.g, c)
	p.run()
	if len(p.hq) != 1 {
		t.Fatalf("host side got %d TLPs", len(p.hq))
	}
	v, err := tlp.Parse(p.hq[0].v())
	if err != nil || v.Tag() != 700 || v.CompleterID() != gpuFn {
		t.Fatalf("completion: %v tag %d completer %v", err, v.Tag(), v.CompleterID())
	}
}

// Sequence numbers wrap modulo 2^32 without a hitch, losses included.
func TestSequenceWrap(t *testing.T) {
	p := newTestPair(t, Config{}, Config{})
	p.up()
	var start uint32 = 0xFFFFFFF0
	p.h.retx.una, p.h.retx.nxt, p.g.reorder.next = start, start, start
	n := 0
	p.drop = func(from *Bridge, f []byte) bool {
		if from == p.h && encap.Header(f).Type() == encap.MsgTLP {
			n++
			return n%4 == 0
		}
		return false
	}
	for i := 0; i < 64; i++ {
		p.send(p.h, mwr(uint64(i)*0x1000, 64))
		p.run()
	}
	p.advance(20*time.Millisecond, 50*time.Microsecond)
	if len(p.gq) != 64 {
		t.Fatalf("delivered %d of 64 across the wrap", len(p.gq))
	}
	for i, d := range p.gq {
		if d.v().Address() != uint64(i)*0x1000 {
			t.Fatalf("TLP %d out of order across the wrap", i)
		}
	}
	if p.h.retx.una != start+64 {
		t.Fatalf("sndUna %#x, want %#x", p.h.retx.una, start+64)
	}
}

func TestPeerMaxTLP(t *testing.T) {
	p := newTestPair(t, Config{MaxPayload: 1024, MTU: 1472}, Config{MaxPayload: 256})
	p.up()
	err := p.h.HandleTLP(p.now, enc(mwr(0, 512)))
	if !errors.Is(err, ErrMalformedTLP) || !errors.Is(err, ErrPeerTLPSize) || !strings.Contains(err.Error(), "peer") {
		t.Fatalf("512-byte write to a 256-byte peer: %v", err)
	}
	p.send(p.h, mwr(0, 256))
}

// A credit update that is lost does not stall the sender: with nothing in
// flight it probes with KEEPALIVEs, whose answers carry the limits.
func TestLostCreditUpdateProbed(t *testing.T) {
	gc := Config{}
	gc.Credits[tlp.Posted] = ClassCredits{Headers: 1, Data: 64}
	p := newTestPair(t, Config{}, gc)
	p.up()
	dropCredit := true
	p.drop = func(from *Bridge, f []byte) bool {
		h := encap.Header(f)
		return from == p.g && dropCredit && (h.Type() == encap.MsgCredit || h.Type() == encap.MsgAck)
	}
	p.send(p.h, mwr(0x1000, 64))
	p.send(p.h, mwr(0x2000, 64)) // waits for the credit of the first
	p.advance(200*time.Microsecond, 10*time.Microsecond)
	if len(p.gq) != 1 {
		t.Fatalf("delivered %d, want 1 before the credit returns", len(p.gq))
	}
	dropCredit = false // updates flow again, but none is due any more
	p.advance(5*time.Millisecond, 50*time.Microsecond)
	if len(p.gq) != 2 {
		t.Fatalf("delivered %d: the sender never learned the returned credit", len(p.gq))
	}
	if p.h.Counters().KeepalivesSent == 0 {
		t.Fatal("no probe sent")
	}
}

// One direction dies: the side that hears nothing declares the link down
// and its RESET (or new HELLO) takes the other side down at once, long
// before that side's own silence timer; both come back with new sessions.
func TestOneWayFailureResets(t *testing.T) {
	p := newTestPair(t, Config{DeadAfter: 3 * time.Millisecond}, Config{DeadAfter: 30 * time.Millisecond})
	p.up()
	gpuToHost := false
	p.drop = func(from *Bridge, f []byte) bool { return from == p.g && !gpuToHost }
	p.advance(4*time.Millisecond, 100*time.Microsecond)
	if p.h.State() == StateUp {
		t.Fatal("host side still up after 4 ms of silence")
	}
	if p.g.State() == StateUp {
		t.Fatal("GPU side did not react to the host side's RESET/HELLO")
	}
	gpuToHost = true
	p.advance(3*time.Millisecond, 100*time.Microsecond)
	if p.h.State() != StateUp || p.g.State() != StateUp {
		t.Fatalf("states %v/%v after repair", p.h.State(), p.g.State())
	}
	if !hasKind(p.gev, EventLinkDown) || hasKind(p.gev, EventSurpriseRemoval) || !hasKind(p.hev, EventSurpriseRemoval) {
		t.Fatalf("events host %v gpu %v", p.hev, p.gev)
	}
}
