package conform

import (
	"fmt"
	"slices"
	"time"

	"github.com/dxpu/dxpu/internal/app/units"
	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
)

type scenario struct {
	name string
	run  func(*kit) error
}

var scenarios = []scenario{
	{"handshake", (*kit).handshake},
	{"exchange", (*kit).exchange},
	{"loss-to-iut", (*kit).lossToIUT},
	{"loss-from-iut", (*kit).lossFromIUT},
	{"duplicates", (*kit).duplicates},
	{"credits", (*kit).credits},
	{"ordering", (*kit).ordering},
	{"tags", (*kit).tagsScenario},
	{"completion-timeout", (*kit).completionTimeout},
	{"malformed", (*kit).malformed},
	{"reset", (*kit).reset},
	{"flap-short", (*kit).flapShort},
	{"flap-long", (*kit).flapLong},
	{"keys", (*kit).keysScenario},
}

// Scenarios returns the scenario names in the order they run.
func Scenarios() []string {
	var n []string
	for _, s := range scenarios {
		n = append(n, s.name)
	}
	return n
}

func pick(names []string) ([]scenario, error) {
	if len(names) == 0 {
		return scenarios, nil
	}
	var out []scenario
	for _, s := range scenarios {
		if slices.Contains(names, s.name) {
			out = append(out, s)
		}
	}
	for _, n := range names {
		if !slices.Contains(Scenarios(), n) {
			return nil, fmt.Errorf("%w: unknown scenario %q (have %v)", ErrOptions, n, Scenarios())
		}
	}
	return out, nil
}

const needStub = "needs the kit to control the IUT's local side (Options.Stub) or its test target (--doorbell)"

// begin starts a new kit session with advert a and waits until both
// sides are up.
func (k *kit) begin(a advert) error {
	prev, prevISN, wasUp := k.iut.Session, k.iut.ISN, k.iutUp
	k.newSession(k.now(), a)
	if wasUp {
		k.iutKnown = false // frames of its old session are stale now
	}
	ok, err := k.await(k.reply(), func() bool { return k.up })
	if err != nil {
		return err
	}
	if !ok {
		k.led.fail("HSK-2", "no HELLO-ACK echoing the kit's session %#x within %v", k.session, k.reply())
		return errNoLink
	}
	k.expectRenew = false
	if ok, err = k.await(k.reply(), func() bool { return k.iutUp }); err != nil {
		return err
	} else if !ok {
		k.led.fail("HSK-3", "no frame with Ack and credits within %v of the kit echoing session %#x", k.reply(), k.iut.Session)
		return errNoLink
	}
	if wasUp {
		// A new start under the old nonce (HSK-4's to judge) has a new ISN.
		if k.iut.Session == prev && k.iut.ISN == prevISN {
			k.led.fail("LNK-7", "kept its session %#x when the kit started a new one", prev)
		} else {
			k.led.pass("LNK-7", "the kit's new session ended the old one (%#x -> %#x)", prev, k.iut.Session)
		}
	}
	return nil
}

// probe sends a KEEPALIVE with a fresh probe number and waits for its
// KEEPALIVE-ACK; it judges CTL-3.
func (k *kit) probe() (bool, error) {
	k.kaProbe++
	if k.kaProbe == 0 {
		k.kaProbe = 1
	}
	p := k.kaProbe
	k.kaSent[p] = true
	if err := k.send(k.control(encap.Control{Type: encap.CtlKeepalive, PeerSession: k.iut.Session, Probe: p})); err != nil {
		return false, err
	}
	t0, strays, frames, restarts := k.now(), k.kaStrays, k.frames, k.restarts
	ok, err := k.await(k.reply(), func() bool { _, ok := k.kaAcks[p]; return ok })
	if err != nil || !ok {
		k.probeMiss = k.missNote(p, t0, frames, restarts)
		// Answered, with another number (CTL-3 failed as it came): the
		// IUT is alive.
		return k.kaStrays > strays, err
	}
	if d := k.elapsed(t0, k.kaAcks[p]); d > k.timers.Slack {
		k.led.fail("CTL-3", "KEEPALIVE probe %d answered after %v", p, d)
	} else {
		k.led.pass("CTL-3", "KEEPALIVE answered at once with its probe number")
	}
	return true, nil
}

// missNote says what the IUT did while probe p went unanswered from t0:
// an IUT that ignored the probe reads apart from one that restarted, one
// whose frames the kit could not open, and a kit that was not running.
func (k *kit) missNote(p uint8, t0 time.Duration, frames, restarts int) string {
	now := k.now()
	ran := k.elapsed(t0, now)
	note := units.Sprintf(" (probe %d: %v waited, %v more the kit stalled; meanwhile the IUT sent %d frames the kit opened",
		p, ran.Round(time.Millisecond), (now - t0 - ran).Round(time.Millisecond), k.frames-frames)
	if k.frames > frames {
		note += units.Sprintf(", the last a %s %v before the end", k.lastKind, (now - k.lastFrame).Round(time.Millisecond))
	}
	if k.restarts != restarts {
		note += fmt.Sprintf(", and restarted its session %d times", k.restarts-restarts)
	}
	return note + k.unopenedNote() + ")"
}

func (k *kit) handshake() error {
	k.silent = true
	frames, hellos := k.frames, k.hellos
	wait := 30*k.timers.HelloInterval + k.timers.Slack
	repeated := func() bool { return k.hellos >= 2 }
	onlyHellos := func() bool { return k.hellos > 0 && k.frames-frames == k.hellos-hellos }
	ok, _, err := k.within(wait, repeated)
	if err == nil && !ok && onlyHellos() {
		// Before failing, a second more: the IUT may be a process starved
		// on a loaded host.
		ok, _, err = k.within(time.Second, repeated)
	}
	k.silent = false
	if err != nil {
		return err
	}
	switch {
	case ok:
		k.led.pass("HSK-1", "HELLO repeated while not up")
	case onlyHellos():
		// It sent a HELLO, so it was not up, and nothing else since: the
		// kit was silent, so it could not have come up.
		k.led.fail("HSK-1", "not up, it sent %d HELLO in all (none more in %v of the kit's silence; hello interval %v)", k.hellos, wait+time.Second, k.timers.HelloInterval)
	default:
		k.led.na("HSK-1", "fewer than 2 HELLOs in %v of the kit's silence (the IUT may be up with an older session)", wait)
	}
	if err := k.begin(defaultAdvert()); err != nil {
		return err
	}
	return k.measureKeepalive()
}

// mismatch is the error for an IUT whose settings are not the kit's
// options: what it shows, what the kit was told, and the rule it breaks
// if the kit was told right.
func mismatch(format string, args ...any) error {
	return units.Errorf("%w: "+format, append([]any{ErrMismatch}, args...)...)
}

// measureKeepalive measures the IUT's Keepalive before anything is judged
// against it: up and idle, with the kit quiet but for answering its
// KEEPALIVEs, the IUT sends one every Keepalive (LNK-1). Regular intervals
// that are not the Keepalive the kit was told are a timer mismatch, which
// would otherwise fail LNK-1, LNK-2 and whatever waits on a timer.
func (k *kit) measureKeepalive() error {
	const want = 3 // intervals
	ka, slack := k.timers.Keepalive, k.timers.Slack
	limit := 8*(ka+slack) + 2*time.Second
	session := k.iut.Session
	n0, from := len(k.kaTimes), k.now()
	// An interval is measured on the wall clock, as the IUT's timer runs,
	// and only when no stall of the kit's own could have delayed the
	// arrival of the KEEPALIVE that ends it or of the one before (frames
	// wait in the socket while the kit is stalled).
	measured := func() []time.Duration {
		var gaps []time.Duration
		if len(k.kaTimes) < n0 {
			return nil // a new IUT session started over
		}
		times := k.kaTimes[n0:]
		for i := 1; i < len(times); i++ {
			lo := from
			if i >= 2 {
				lo = times[i-2]
			}
			if k.stalled == nil || k.stalled(lo, times[i]) <= slack/2 {
				gaps = append(gaps, times[i]-times[i-1])
			}
		}
		return gaps
	}
	k.quiet = true
	_, err := k.await(limit, func() bool { return k.iut.Session != session || len(measured()) >= want })
	k.quiet = false
	if err != nil || k.iut.Session != session {
		return err
	}
	if n := len(k.kaTimes) - n0; n < 2 {
		k.led.fail("LNK-1", "up and idle, sent %d KEEPALIVEs in %v (Keepalive %v)", n, limit, ka)
		return nil
	}
	gaps := measured()
	if len(gaps) == 0 {
		return nil // the kit was stalled throughout: LNK-1 is judged as it goes
	}
	shortest := slices.Min(gaps)
	if shortest > ka+slack || shortest+slack < ka/2 {
		return mismatch("up and idle, it sent a KEEPALIVE every %v (shortest of %d intervals), the kit was told --keepalive %v: give the kit the implementation's timers (if %v is its Keepalive, it breaks LNK-1)",
			shortest.Round(time.Microsecond), len(gaps), ka, ka)
	}
	return nil
}

// acked reports whether the IUT acknowledged TLP s.
func (k *kit) acked(s uint32) bool { return k.ackSeen && seqLT(s, k.lastAck) }

func (k *kit) exchange() error {
	if err := k.begin(defaultAdvert()); err != nil {
		return err
	}
	data := make([]byte, 8)
	for i := range data {
		data[i] = byte(k.rng.Uint32())
	}
	w, err := k.sendTLPs(memWrite(k.kitID, k.addr(0), data))
	if err != nil {
		return err
	}
	t0 := k.now()
	bound := k.timers.AckDelay + k.timers.Slack
	if ok, err := k.await(k.reply(), func() bool { return k.acked(w) }); err != nil {
		return err
	} else if !ok {
		k.led.fail("ACK-5", "a posted write (TLP %#x) was not acknowledged within %v", w, k.reply())
	} else if d := k.elapsed(t0, k.now()); d > bound {
		k.led.fail("ACK-5", "TLP %#x acknowledged after %v, AckDelay %v + %v slack", w, d, k.timers.AckDelay, k.timers.Slack)
	} else {
		k.led.pass("ACK-5", "acknowledged within AckDelay without reverse traffic")
	}
	if k.iut.Infinite&(1<<encap.CreditPH) == 0 {
		full := func() bool {
			return uint16(k.lim[encap.CreditPH]-k.kitConsumed[encap.CreditPH]) == uint16(k.iut.Credits[encap.CreditPH])
		}
		if ok, _, err := k.within(bound, full); err != nil {
			return err
		} else if ok {
			k.led.pass("CRD-5", "credits of delivered TLPs advertised again")
		} else {
			k.led.fail("CRD-5", "PH limit %d within %v of the write: the kit consumed %d of %d initial credits", k.lim[encap.CreditPH], bound, k.kitConsumed[encap.CreditPH], k.iut.Credits[encap.CreditPH])
		}
	}
	tag := k.newTag()
	r, err := k.sendTLPs(memRead(k.kitID, tag, k.addr(0), 8))
	if err != nil {
		return err
	}
	if ok, err := k.await(k.reply(), func() bool { _, ok := k.completion(tag); return ok }); err != nil {
		return err
	} else if !ok {
		if k.acked(r) {
			k.led.fail("ACK-1", "read %#x (tag %d) was acknowledged, no completion came within %v", r, tag, k.reply())
		} else {
			k.led.fail("ACK-5", "read %#x (tag %d) neither acknowledged nor completed within %v", r, tag, k.reply())
		}
		return nil
	}
	k.led.pass("ACK-1", "acknowledged requests were executed")
	c, _ := k.completion(tag)
	if st := c.view().Status(); st != tlp.StatusSC {
		return mismatch("a read of 8 bytes at %#x was completed with status %v: the kit's window (--addr %#x, --size %d) is not memory at the implementation", k.addr(0), st, k.opt.Addr, k.opt.Size)
	}
	if got := c.view().Payload(); string(got) != string(data) {
		k.led.fail("ORD-3", "a read after a write returned % x, the write wrote % x: the read passed it (or the window is not memory)", got, data)
	} else {
		k.led.pass("ORD-3", "a read after a write returned the written data")
	}
	return nil
}

func (k *kit) nakFor(s uint32) bool { return slices.Contains(k.nakLog, s) }

func (k *kit) lossToIUT() error {
	if err := k.begin(defaultAdvert()); err != nil {
		return err
	}
	data := []byte{0xde, 0xad, 0xbe, 0xef, 0x01, 0x23, 0x45, 0x67}
	t1, t2 := k.newTag(), k.newTag()
	hole := k.queue(memWrite(k.kitID, k.addr(64), data))
	k.queue(memRead(k.kitID, t1, k.addr(64), 8))
	k.queue(memRead(k.kitID, t2, k.addr(0), 4))
	resent := k.resent
	for _, s := range []uint32{hole + 1, hole + 2} {
		f, err := k.tlpFrame(k.now(), s, 1)
		if err != nil {
			return err
		}
		if err := k.send(f); err != nil {
			return err
		}
	}
	bound := k.timers.AckDelay + k.timers.Slack
	if ok, _, err := k.within(bound, func() bool { return k.nakFor(hole) }); err != nil {
		return err
	} else if ok {
		k.led.pass("NAK-1", "NAK at once for a hole")
	} else {
		k.led.fail("NAK-1", "no NAK for the hole at %#x within %v of TLPs behind it", hole, bound)
	}
	if err := k.watch(k.timers.Slack); err != nil {
		return err
	}
	if k.completions(t1)+k.completions(t2) > 0 {
		k.led.fail("SEQ-3", "executed TLPs behind the hole at %#x before it was filled", hole)
	}
	f, err := k.tlpFrame(k.now(), hole, 1)
	if err != nil {
		return err
	}
	if err := k.send(f); err != nil {
		return err
	}
	ok, err := k.await(k.reply(), func() bool { return k.completions(t1) > 0 && k.completions(t2) > 0 })
	if err != nil {
		return err
	}
	if !ok {
		k.led.fail("SEQ-3", "after the hole at %#x was filled, the reads behind it were not completed within %v", hole, k.reply())
		return nil
	}
	if c, _ := k.completion(t1); string(c.view().Payload()) != string(data) {
		k.led.fail("SEQ-3", "the read behind the hole returned % x, the write in the hole wrote % x: delivered out of order", c.view().Payload(), data)
	} else {
		k.led.pass("SEQ-3", "TLPs behind a hole delivered in order once it was filled")
	}
	k.judgeHeld(hole, resent)
	return nil
}

func (k *kit) lossFromIUT() error {
	if err := k.begin(defaultAdvert()); err != nil {
		return err
	}
	// A lost completion with nothing behind it: only the RTO can recover.
	k.dropTLPs = 1
	t1 := k.newTag()
	if _, err := k.sendTLPs(memRead(k.kitID, t1, k.addr(0), 4)); err != nil {
		return err
	}
	t0 := k.now()
	wait := k.reply() + k.timers.MaxRTO
	if ok, err := k.await(wait, func() bool { return k.completions(t1) > 0 }); err != nil {
		return err
	} else if !ok {
		k.led.fail("RTX-3", "a completion lost on its way to the kit was not retransmitted within %v", wait)
	} else {
		k.led.pass("RTX-3", "a lost TLP was retransmitted after the RTO (%v)", (k.now() - t0).Round(time.Microsecond))
	}
	// A lost completion with another behind it: the kit NAKs the hole.
	// Its retransmissions are lost too until the TLP behind it arrives
	// (keepHole): a kit that stalls before asking for that TLP would
	// otherwise see the RTO fill the hole first, and nothing to NAK.
	k.dropTLPs, k.keepHole = 1, true
	t2, t3 := k.newTag(), k.newTag()
	if _, err := k.sendTLPs(memRead(k.kitID, t2, k.addr(0), 4)); err != nil {
		return err
	}
	if ok, err := k.await(k.reply(), func() bool { return k.dropTLPs == 0 }); err != nil || !ok {
		k.dropTLPs, k.keepHole = 0, false
		k.led.na("NAK-2", "the IUT sent no completion to lose")
		return err
	}
	if _, err := k.sendTLPs(memRead(k.kitID, t3, k.addr(4), 4)); err != nil {
		return err
	}
	if ok, err := k.await(k.reply(), func() bool { return k.kitNakAt != 0 }); err != nil || !ok {
		k.keepHole = false
		k.led.na("NAK-2", "no TLP arrived behind the lost one, the kit had no hole to NAK")
		return err
	}
	nakAt := k.kitNakAt
	if ok, err := k.await(k.reply(), func() bool { return k.completions(t2) > 0 && k.completions(t3) > 0 }); err != nil {
		return err
	} else if !ok {
		k.led.fail("NAK-2", "the TLP the kit NAKed was not retransmitted within %v", k.reply())
	} else if d := k.elapsed(nakAt, k.delivLast); d > k.timers.Slack {
		k.led.fail("NAK-2", "retransmitted %v after the kit's NAK (an RTO, not the NAK?)", d)
	} else {
		k.led.pass("NAK-2", "retransmitted at once on a NAK")
	}
	return nil
}

func (k *kit) duplicates() error {
	if err := k.begin(defaultAdvert()); err != nil {
		return err
	}
	t1 := k.newTag()
	rd := memRead(k.kitID, t1, k.addr(0), 4)
	s, err := k.sendTLPs(rd)
	if err != nil {
		return err
	}
	if ok, err := k.await(k.reply(), func() bool { return k.completions(t1) > 0 && k.acked(s) }); err != nil || !ok {
		k.led.na("SEQ-3", "the first read was not completed and acknowledged")
		return err
	}
	acks := k.acks
	if err := k.send(k.rawFrame(k.pair, s, rd)); err != nil {
		return err
	}
	bound := k.timers.AckDelay + k.timers.Slack
	if ok, _, err := k.within(bound, func() bool { return k.acks > acks }); err != nil {
		return err
	} else if ok {
		k.led.pass("ACK-5", "a duplicate acknowledged at once")
	} else {
		k.led.fail("ACK-5", "a duplicate of TLP %#x was not acknowledged within %v", s, bound)
	}
	// Beyond the window: never executed, never acknowledged.
	t2 := k.newTag()
	far := k.sndNxt + uint32(k.iut.Window) + 8
	if err := k.send(k.rawFrame(k.pair, far, memRead(k.kitID, t2, k.addr(0), 4))); err != nil {
		return err
	}
	// Another pair's frame with the next sequence number.
	t3 := k.newTag()
	other := memRead(k.kitID, t3, k.addr(0), 4)
	if err := k.send(k.rawFrame(k.pair^0x800001, k.sndNxt, other)); err != nil {
		return err
	}
	if err := k.watch(3 * k.timers.Slack); err != nil {
		return err
	}
	switch {
	case k.completions(t1) > 1:
		k.led.fail("SEQ-3", "a duplicate of TLP %#x was executed again (%d completions)", s, k.completions(t1))
	case k.completions(t2) > 0:
		k.led.fail("SEQ-3", "TLP %#x beyond the window was executed", far)
	default:
		k.led.pass("SEQ-3", "duplicates and TLPs beyond the window dropped")
	}
	if k.completions(t3) > 0 {
		k.led.fail("FRM-6", "a frame of pair %#x was executed", k.pair^0x800001)
		return nil
	}
	if _, err := k.sendTLPs(other); err != nil {
		return err
	}
	if ok, err := k.await(k.reply(), func() bool { return k.completions(t3) > 0 }); err != nil {
		return err
	} else if ok {
		k.led.pass("FRM-6", "frames of another pair ignored")
	}
	return nil
}

func (k *kit) credits() error {
	a := defaultAdvert()
	a.credits[encap.CreditCplH] = 2
	if err := k.begin(a); err != nil {
		return err
	}
	var reads [][]byte
	for i := 0; i < 4; i++ {
		reads = append(reads, memRead(k.kitID, k.newTag(), k.addr(4*i), 4))
	}
	if _, err := k.sendTLPs(reads...); err != nil {
		return err
	}
	if _, err := k.await(k.reply(), func() bool { return len(k.cpls) >= 2 }); err != nil {
		return err
	}
	if err := k.watch(3 * k.timers.Slack); err != nil {
		return err
	}
	if n := len(k.cpls); n < 2 {
		k.led.fail("CRD-6", "sent %d of the 2 completions the kit's credits allowed", n)
		return nil
	}
	// The kit raises its limit but says so only in answer to a probe,
	// as if the update had been lost.
	k.adv[encap.CreditCplH] += 2
	k.waitProbe = true
	t0 := k.now()
	wait := k.timers.DeadAfter / 2
	if ok, err := k.await(wait, func() bool { return !k.waitProbe }); err != nil {
		return err
	} else if !ok {
		k.waitProbe = false
		k.led.fail("CRD-6", "stalled on credits with nothing in flight, sent no KEEPALIVE within %v", wait)
	}
	probed := k.now() - t0
	if ok, err := k.await(k.reply(), func() bool { return len(k.cpls) >= 4 }); err != nil {
		return err
	} else if !ok {
		k.led.fail("CRD-6", "did not resume within %v of a frame raising the limit", k.reply())
	} else {
		k.led.pass("CRD-6", "probed after %v and resumed", probed.Round(time.Microsecond))
	}
	return nil
}

// sendCredit tells the IUT the kit's current limits.
func (k *kit) sendCredit() error { return k.send(k.bare(encap.MsgCredit)) }

func (k *kit) ordering() error {
	if k.stub == nil {
		for _, id := range []string{"ORD-2", "ORD-4"} {
			k.led.na(id, needStub)
		}
		return nil
	}
	a := defaultAdvert()
	a.credits[encap.CreditPH], a.credits[encap.CreditNPH], a.tagBits = 1, 1, 10
	if err := k.begin(a); err != nil {
		return err
	}
	st, id := k.stub, k.stub.ID()
	at := func(i int) uint64 { return kitMemory + uint64(64*i) }
	got := func(i int) (rxTLP, bool) { return k.request(at(i)) }
	arrived := func(is ...int) func() bool {
		return func() bool {
			for _, i := range is {
				if _, ok := got(i); !ok {
					return false
				}
			}
			return true
		}
	}
	st.issue(memWrite(id, at(0), []byte{1, 2, 3, 4}))
	if ok, err := k.await(k.reply(), arrived(0)); err != nil || !ok {
		k.led.na("ORD-3", "the stub's first write did not arrive")
		return err
	}
	// ORD-3: a read behind a write stalled on posted credits. The kit
	// holds it for less than the completion timeout, after which the
	// IUT would rightly answer it itself and never send it (TAG-4).
	hold := min(3*k.timers.Slack, k.timers.CompletionTimeout/3)
	st.issue(memWrite(id, at(1), []byte{5, 6, 7, 8}))
	st.issue(memRead(id, 1, at(2), 4))
	if err := k.watch(hold); err != nil {
		return err
	}
	if _, ok := got(2); ok {
		if _, w := got(1); !w {
			k.led.fail("ORD-3", "a read passed a posted write stalled on credits")
		}
	}
	k.adv[encap.CreditPH]++
	if err := k.sendCredit(); err != nil {
		return err
	}
	if ok, err := k.await(k.reply(), arrived(1, 2)); err != nil {
		return err
	} else if !ok {
		k.led.fail("CRD-6", "the write and read did not follow within %v of a credit update", k.reply())
		return nil
	}
	if w, _ := got(1); true {
		if r, _ := got(2); seqLT(r.seq, w.seq) {
			k.led.fail("ORD-3", "read %#x sent before the earlier write %#x", r.seq, w.seq)
		} else {
			k.led.pass("ORD-3", "a read waited for a write stalled on credits")
		}
	}
	// ORD-4: a completion behind a write stalled on posted credits.
	st.issue(memWrite(id, at(3), []byte{9, 9, 9, 9}))
	if err := k.watch(k.timers.Slack); err != nil {
		return err
	}
	tx := k.newTag()
	if _, err := k.sendTLPs(memRead(k.kitID, tx, k.addr(0), 4)); err != nil {
		return err
	}
	if err := k.watch(hold); err != nil {
		return err
	}
	if _, w := got(3); !w && k.completions(tx) > 0 {
		k.led.fail("ORD-4", "a completion passed a posted write stalled on credits")
	}
	k.adv[encap.CreditPH]++
	if err := k.sendCredit(); err != nil {
		return err
	}
	if ok, err := k.await(k.reply(), func() bool { return arrived(3)() && k.completions(tx) > 0 }); err != nil {
		return err
	} else if ok {
		w, _ := got(3)
		if c, _ := k.completion(tx); seqLT(c.seq, w.seq) {
			k.led.fail("ORD-4", "completion %#x sent before the earlier write %#x", c.seq, w.seq)
		} else {
			k.led.pass("ORD-4", "a completion waited for a write stalled on credits")
		}
	}
	// ORD-2: a write and a completion pass a read stalled on credits.
	// (The kit's limits never run further ahead than its buffers, CRD-4:
	// one posted header at a time.)
	k.adv[encap.CreditPH]++
	if err := k.sendCredit(); err != nil {
		return err
	}
	st.issue(memRead(id, 2, at(4), 4))
	st.issue(memWrite(id, at(5), []byte{4, 3, 2, 1}))
	ty := k.newTag()
	if _, err := k.sendTLPs(memRead(k.kitID, ty, k.addr(0), 4)); err != nil {
		return err
	}
	if ok, err := k.await(k.reply(), func() bool { return arrived(5)() && k.completions(ty) > 0 }); err != nil {
		return err
	} else if !ok {
		k.led.fail("ORD-2", "a write and a completion stayed behind a read stalled on credits for %v", k.reply())
	} else {
		k.led.pass("ORD-2", "a write and a completion passed a read stalled on credits")
	}
	// Complete the stub's reads; the stub must get them with its own tags.
	k.adv[encap.CreditNPH]++
	r2, ok := got(2)
	if !ok {
		// The IUT started a new session meanwhile (what it got of the
		// old one is forgotten); LNK-2 or LNK-7 judge that.
		return nil
	}
	if err := k.complete(r2); err != nil {
		return err
	}
	if ok, err := k.await(k.reply(), arrived(4)); err != nil || !ok {
		return err
	}
	r4, ok := got(4)
	if !ok {
		return nil
	}
	if err := k.complete(r4); err != nil {
		return err
	}
	return k.stubGotOwnTags(1, 2)
}

// stubGotOwnTags judges TAG-1's restoring half: the stub gets completions
// with its own tags and requester ID.
func (k *kit) stubGotOwnTags(tags ...uint16) error {
	ok, err := k.await(k.reply(), func() bool {
		for _, t := range tags {
			if len(k.stub.completions(t)) == 0 {
				return false
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	for _, t := range tags {
		cs := k.stub.completions(t)
		switch {
		case !ok && len(cs) == 0:
			k.led.fail("TAG-1", "the local requester got no completion with its own tag %d within %v", t, k.reply())
		case len(cs) > 0 && cs[0].RequesterID != k.stub.ID():
			k.led.fail("TAG-1", "completion for local tag %d carries requester %v, not %v", t, cs[0].RequesterID, k.stub.ID())
		case len(cs) > 0:
			k.led.pass("TAG-1", "completions restored to the requester's own tag")
		}
	}
	return nil
}

func (k *kit) tagsScenario() error {
	if k.stub == nil {
		for _, id := range []string{"TAG-1", "TAG-2", "TAG-5"} {
			k.led.na(id, needStub)
		}
		return nil
	}
	if err := k.begin(defaultAdvert()); err != nil {
		return err
	}
	const n = 8
	var tags []uint16
	for i := 0; i < n; i++ {
		k.stub.issue(memRead(k.stub.ID(), uint16(i), kitMemory+uint64(4*i), 4))
		tags = append(tags, uint16(i))
	}
	reqs := func() []rxTLP {
		var out []rxTLP
		for _, r := range k.inbox {
			if r.view().Kind().IsNonPosted() {
				out = append(out, r)
			}
		}
		return out
	}
	if ok, err := k.await(k.reply(), func() bool { return len(reqs()) >= n }); err != nil {
		return err
	} else if !ok {
		k.led.fail("TAG-5", "only %d of %d reads arrived within %v", len(reqs()), n, k.reply())
	} else {
		k.led.pass("TAG-5", "%d reads forwarded, none dropped", n)
	}
	rs := reqs()
	for i := len(rs) - 1; i >= 0; i-- {
		if err := k.complete(rs[i]); err != nil {
			return err
		}
	}
	return k.stubGotOwnTags(tags...)
}

func (k *kit) completionTimeout() error {
	if k.stub == nil {
		k.led.na("TAG-4", needStub)
		return nil
	}
	if err := k.begin(defaultAdvert()); err != nil {
		return err
	}
	const local = 20
	addr := uint64(kitMemory + 0x800)
	k.stub.issue(memRead(k.stub.ID(), local, addr, 4))
	if ok, err := k.await(k.reply(), func() bool { _, ok := k.request(addr); return ok }); err != nil || !ok {
		k.led.na("TAG-4", "the stub's read did not arrive")
		return err
	}
	req, _ := k.request(addr)
	ct := k.timers.CompletionTimeout
	wait := ct + k.reply()
	ok, err := k.await(wait, func() bool { return len(k.stub.completions(local)) > 0 })
	if err != nil {
		return err
	}
	if !ok {
		k.led.fail("TAG-4", "a request left unanswered got no completion within %v (CompletionTimeout %v)", wait, ct)
		return nil
	}
	el := k.now() - req.at
	c := k.stub.completions(local)[0]
	switch {
	case c.Status != tlp.StatusCA:
		k.led.fail("TAG-4", "the unanswered request was completed with status %v, want CA", c.Status)
	case el < ct-k.timers.Slack:
		k.led.fail("TAG-4", "answered CA after %v, before the completion timeout %v", el, ct)
	default:
		k.led.pass("TAG-4", "unanswered request completed with CA after %v", el.Round(time.Millisecond))
	}
	// The late completion must not reach the requester.
	if err := k.complete(req); err != nil {
		return err
	}
	if err := k.watch(3 * k.timers.Slack); err != nil {
		return err
	}
	if n := len(k.stub.completions(local)); n > 1 {
		k.led.fail("TAG-3", "a late completion of a timed-out request reached the requester (%d completions)", n)
	} else {
		k.led.pass("TAG-3", "a late completion of a timed-out request was dropped")
	}
	return nil
}

// badFrame is one malformed frame of the malformed scenario; read says it
// carries a read with tag, which would complete if the frame took effect.
type badFrame struct {
	name string
	b    []byte
	read bool
	tag  uint16
	rule string // the rule that makes it malformed when more precise than FRM-10
}

// malformedFrames builds the bad frames the malformed scenario sends. Each
// TLP frame carries a read with its own tag, so an executed read names its
// frame even when its completion comes after a later frame's probe.
func (k *kit) malformedFrames() []badFrame {
	seq := k.sndNxt
	var out []badFrame
	add := func(name string, f func(rd []byte) []byte) {
		tag := k.newTag()
		out = append(out, badFrame{name: name, b: f(memRead(k.kitID, tag, k.addr(0), 4)), read: true, tag: tag})
	}
	good := func(rd []byte) []byte { return k.rawFrame(k.pair, seq, rd) }
	mod := func(f func(b []byte, rd []byte)) func(rd []byte) []byte {
		return func(rd []byte) []byte { b := good(rd); f(b, rd); return b }
	}
	setLen := func(b []byte, l int) { b[encap.HeaderLen], b[encap.HeaderLen+1] = byte(l>>8), byte(l) }
	add("short", func(rd []byte) []byte { return good(rd)[:20] })
	add("version 2", mod(func(b, _ []byte) { b[0] = 0x20 | b[0]&0x0f }))
	add("message type 9", mod(func(b, _ []byte) { b[1] = 9 }))
	add("TLP frame with N = 0", mod(func(b, _ []byte) { b[5] = 0 }))
	// One DW more than the TLP: the read's size depends on the address
	// (a 3-DW header below 4 GiB, 4 DW above), so a fixed length would be
	// exact, and the frame valid, for one of them.
	add("length table overrun", mod(func(b, rd []byte) { setLen(b, len(rd)+4) }))
	add("TLP length 10", mod(func(b, _ []byte) { setLen(b, 10) }))
	add("bytes after the last TLP", func(rd []byte) []byte {
		b := good(rd)
		encap.Header(b).SetBodyLen(encap.Header(b).BodyLen() + 4)
		return append(b, 0, 0, 0, 0)
	})
	add("body length beyond the frame", mod(func(b, _ []byte) { encap.Header(b).SetBodyLen(200) }))
	add("unparseable TLP", func([]byte) []byte {
		bad := []byte{0x9f, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0} // Fmt 100: a prefix, not a TLP
		return k.rawFrame(k.pair, seq, bad)
	})
	out[len(out)-1].read = false
	out = append(out, k.moreMalformed(seq)...)
	garbage := make([]byte, 64)
	for i := range garbage {
		garbage[i] = byte(k.rng.Uint32())
	}
	garbage[0] = 0xf0 | garbage[0]&0x0f
	helloBad := k.hello(encap.CtlHello)
	hb := encap.Header(helloBad).Body()
	hb[4] ^= 0xff         // a session the IUT never saw: it would restart
	hb[12], hb[13] = 0, 0 // window 0
	ctlBad := k.control(encap.Control{Type: encap.CtlKeepalive, PeerSession: k.iut.Session, Probe: 77})
	encap.Header(ctlBad).Body()[1] = 2
	return append(out,
		badFrame{name: "control version 2", b: ctlBad, rule: "CTL-1"},
		badFrame{name: "HELLO with window 0", b: helloBad, rule: "CTL-2"},
		badFrame{name: "garbage", b: garbage})
}

// malformedOK reports why f is not malformed by the kit's own checks (""
// when it is): a frame the kit calls malformed but would itself accept
// judges the IUT on a valid frame.
func (k *kit) malformedOK(f badFrame) string {
	e := newEnd(newLedger(), k.role, k.pair, true, k.timers, 0)
	h, body, ok := e.checkFrame(f.b)
	if !ok {
		return ""
	}
	if h.Type() != encap.MsgControl {
		return "it is well formed"
	}
	if _, err := encap.ParseControl(body); err != nil {
		return ""
	}
	return "its control message is well formed"
}

func (k *kit) malformed() error {
	if err := k.begin(defaultAdvert()); err != nil {
		return err
	}
	session, restarts := k.iut.Session, k.restarts
	cases := k.malformedFrames()
	// The control-version-2 KEEPALIVE carries probe 77: an answer to it is
	// not a stray probe number (CTL-3).
	k.kaSent[77] = true
	for _, c := range cases {
		if c.rule == "KEY-1" {
			continue // well formed but for the sealed bit, which the kit's own check only reports
		}
		if why := k.malformedOK(c); why != "" {
			return fmt.Errorf("the kit's %q frame is not malformed: %s (% x)", c.name, why, c.b)
		}
	}
	executed := func() (string, bool) {
		for _, c := range cases {
			if c.read && k.completions(c.tag) > 0 {
				return c.name, true
			}
		}
		return "", false
	}
	ruleOf := func(name string) string {
		for _, c := range cases {
			if c.name == name && c.rule != "" {
				return c.rule
			}
		}
		return "FRM-10"
	}
	for _, c := range cases {
		seq := k.sndNxt
		if err := k.send(c.b); err != nil {
			return err
		}
		ok, err := k.probe()
		if err != nil {
			return err
		}
		name, ran := executed()
		switch {
		case !ok:
			k.led.fail(ruleOf(c.name), "after the %q frame the IUT stopped answering KEEPALIVE%s", c.name, k.probeMiss)
			return nil
		case ran:
			k.led.fail(ruleOf(name), "the read in the %q frame was executed", name)
			return nil
		case k.acked(seq):
			k.led.fail(ruleOf(c.name), "the %q frame was acknowledged", c.name)
			return nil
		case k.iut.Session != session || k.restarts != restarts:
			k.led.fail(ruleOf(c.name), "the %q frame reset the session", c.name)
			return nil
		}
	}
	tag := k.newTag()
	if _, err := k.sendTLPs(memRead(k.kitID, tag, k.addr(0), 4)); err != nil {
		return err
	}
	ok, err := k.await(k.reply(), func() bool { return k.completions(tag) > 0 })
	if err != nil {
		return err
	}
	// The valid read completed after every bad frame: a read of one of them
	// that was executed has completed too.
	if name, ran := executed(); ran {
		k.led.fail(ruleOf(name), "the read in the %q frame was executed", name)
	} else if !ok {
		k.led.fail("FRM-10", "after %d malformed frames a valid read was not completed within %v", len(cases), k.reply())
	} else {
		k.led.pass("FRM-10", "%d malformed frames dropped whole; session and state intact", len(cases))
		for _, c := range cases {
			if c.rule != "" {
				k.led.pass(c.rule, "the %q frame dropped whole", c.name)
			}
		}
	}
	return nil
}

func (k *kit) reset() error {
	if err := k.begin(defaultAdvert()); err != nil {
		return err
	}
	old := k.iut.Session
	wrong := old ^ 0x5a5a5a5a
	if err := k.send(k.control(encap.Control{Type: encap.CtlReset, Reason: encap.ResetAdmin, PeerSession: wrong})); err != nil {
		return err
	}
	if ok, err := k.probe(); err != nil {
		return err
	} else if !ok || k.iut.Session != old {
		k.led.fail("LNK-6", "a RESET naming session %#x, not the IUT's %#x, ended the session", wrong, old)
		return nil
	}
	// A RESET of its own session ends it; the kit goes quiet and waits
	// for the IUT's new session.
	k.silent = true
	k.expectRenew = true
	k.iutKnown = false
	if err := k.send(k.control(encap.Control{Type: encap.CtlReset, Reason: encap.ResetAdmin, PeerSession: old})); err != nil {
		return err
	}
	ok, err := k.await(k.reply(), func() bool { return k.iutKnown && k.iut.Session != old })
	if err != nil {
		return err
	}
	if !ok {
		k.silent = false
		k.led.fail("LNK-6", "no new session within %v of a RESET of session %#x", k.reply(), old)
		return nil
	}
	if k.keys != nil {
		// A keyed IUT without a session has no keys to open the frame
		// with, so it cannot tell what it is: no RESET reason 2 is due.
		k.silent = false
		k.led.pass("LNK-6", "RESETs honoured for the own session, ignored for another (keyed: no RESET reason 2 for frames it cannot open)")
		return k.begin(defaultAdvert())
	}
	if err := k.notUpEdges(); err != nil {
		return err
	}
	// A frame from a session the IUT does not know draws RESET reason 2.
	n := len(k.resets)
	if err := k.send(k.bare(encap.MsgAck)); err != nil {
		return err
	}
	got, _, err := k.within(k.timers.Slack, func() bool {
		return slices.ContainsFunc(k.resets[n:], func(c encap.Control) bool { return c.Reason == encap.ResetUnknownSession })
	})
	k.silent = false
	if err != nil {
		return err
	}
	if got {
		k.led.pass("LNK-6", "RESETs honoured for the own session, ignored for another; frames without a session answered with RESET reason 2")
	} else {
		k.led.fail("LNK-6", "a frame from a session it does not know drew no RESET (reason 2) within %v", k.timers.Slack)
	}
	return k.begin(defaultAdvert())
}

// flapShort: an outage of half DeadAfter must be invisible (LNK-3). The
// kit's own wait counts only the time it ran; a kit stalled through it
// made a longer outage on the wall clock, and an IUT that then declared
// the link down after DeadAfter of real silence was right: the kit tries
// again (3 times at most) rather than blame it.
func (k *kit) flapShort() error {
	for try := 1; ; try++ {
		again, err := k.flapShortOnce(try == 3)
		if err != nil || !again {
			return err
		}
	}
}

// flapShortOnce is one outage; again: the kit stalled past DeadAfter and
// the IUT rightly ended the session (on the last try: LNK-3 stays n/a).
func (k *kit) flapShortOnce(last bool) (again bool, err error) {
	if err := k.begin(defaultAdvert()); err != nil {
		return false, err
	}
	tag := k.newTag()
	if _, err := k.sendTLPs(memRead(k.kitID, tag, k.addr(0), 4)); err != nil {
		return false, err
	}
	restarts, session := k.restarts, k.iut.Session
	out := k.timers.DeadAfter / 2
	k.deaf, k.silent = true, true
	quietFrom := k.lastSent // the IUT's silence starts at the kit's last frame
	if err := k.watch(out); err != nil {
		return false, err
	}
	k.deaf, k.silent = false, false
	back := k.now()
	bound := k.reply() + k.timers.MaxRTO
	ok, err := k.await(bound, func() bool { return k.completions(tag) > 0 || k.restarts != restarts })
	if err != nil {
		return false, err
	}
	if wall := back - quietFrom; k.restarts != restarts && wall >= k.timers.DeadAfter-k.timers.Slack {
		if !last {
			return true, nil
		}
		k.led.na("LNK-3", "the kit stalled in each of 3 outages of %v: the last lasted %v on the wall clock, and the IUT rightly declared the link down (DeadAfter %v)",
			out, wall.Round(time.Millisecond), k.timers.DeadAfter)
		return false, nil
	}
	if k.restarts != restarts && k.restartAt >= back-out && k.restartAt < back {
		return false, mismatch("it declared the link down after %v of silence, the kit was told --dead-after %v: give the kit the implementation's timers (if %v is its DeadAfter, it breaks LNK-2 and LNK-3)",
			(k.restartAt - quietFrom).Round(time.Microsecond), k.timers.DeadAfter, k.timers.DeadAfter)
	}
	if !ok && k.restarts == restarts {
		// Later than MaxRTO after the outage: its RTO backed off further
		// than the kit was told, or it never retransmits.
		late := max(10*k.timers.MaxRTO, k.timers.DeadAfter)
		if ok, err = k.await(late, func() bool { return k.completions(tag) > 0 || k.restarts != restarts }); err != nil {
			return false, err
		}
		if d := k.elapsed(back, k.delivLast); ok && k.restarts == restarts && d > bound {
			return false, mismatch("the completion lost in an outage was retransmitted %v after it, the kit was told --max-rto %v: give the kit the implementation's timers (if %v is its MaxRTO, it breaks LNK-3)",
				d.Round(time.Microsecond), k.timers.MaxRTO, k.timers.MaxRTO)
		}
	}
	switch {
	case k.restarts != restarts || k.iut.Session != session:
		k.led.fail("LNK-3", "an outage of %v (DeadAfter %v) ended the session", out, k.timers.DeadAfter)
	case !ok:
		k.led.fail("LNK-3", "the completion lost in an outage of %v was not retransmitted within %v", out, bound+max(10*k.timers.MaxRTO, k.timers.DeadAfter))
	case k.completions(tag) > 1:
		k.led.fail("LNK-3", "an outage of %v duplicated a completion", out)
	default:
		k.led.pass("LNK-3", "an outage of %v was invisible: same session, the lost completion retransmitted", out)
	}
	return false, nil
}

func (k *kit) flapLong() error {
	if err := k.begin(defaultAdvert()); err != nil {
		return err
	}
	const local = 30
	addr := uint64(kitMemory + 0xc00)
	if k.stub == nil {
		k.led.na("LNK-4", needStub)
	}
	tag := k.newTag()
	if _, err := k.sendTLPs(memRead(k.kitID, tag, k.addr(0), 4)); err != nil {
		return err
	}
	old, oldISN := k.iut.Session, k.iut.ISN
	k.deaf, k.silent = true, true
	t0, quietFrom := k.now(), k.lastSent // the IUT's silence starts at the kit's last frame
	// The stub's read must still be outstanding, not timed out, when the
	// link goes down: issue it half a completion timeout before.
	issued := false
	issueAt := max(k.timers.DeadAfter-k.timers.CompletionTimeout/2, 0)
	wait := k.timers.DeadAfter + k.reply()
	ok, err := k.await(wait, func() bool {
		if k.stub != nil && !issued && k.now()-t0 >= issueAt {
			issued = true
			k.stub.issue(memRead(k.stub.ID(), local, addr, 4))
		}
		return k.iut.Session != old
	})
	if err != nil {
		return err
	}
	firstOK := ok
	if !ok {
		// Not down yet: a DeadAfter longer than the kit was told, or none.
		late := max(10*k.timers.DeadAfter, 5*time.Second)
		if ok, err = k.await(late, func() bool { return k.iut.Session != old }); err != nil {
			return err
		}
		wait += late
	}
	// On the kit's clock, stalls and all: the IUT's clock ran on meanwhile.
	down := k.now() - quietFrom
	if ok && (!firstOK || down < k.timers.DeadAfter-k.timers.Slack) {
		return mismatch("it declared the link down after %v of silence, the kit was told --dead-after %v: give the kit the implementation's timers (if %v is its DeadAfter, it breaks LNK-2)",
			down.Round(time.Microsecond), k.timers.DeadAfter, k.timers.DeadAfter)
	}
	switch {
	case !ok:
		k.led.fail("LNK-2", "still in session %#x after %v of silence (DeadAfter %v)", old, wait, k.timers.DeadAfter)
	default:
		k.led.pass("LNK-2", "declared down after %v of silence (DeadAfter %v)", down.Round(time.Millisecond), k.timers.DeadAfter)
		k.led.judgeTimers(k.timers.Keepalive, k.timers.DeadAfter)
	}
	if k.stub != nil {
		ok, err := k.await(k.reply(), func() bool { return len(k.stub.completions(local)) > 0 })
		if err != nil {
			return err
		}
		if !ok {
			k.led.fail("LNK-4", "a request outstanding at link-down got no completion within %v", k.reply())
		} else if s := k.stub.completions(local)[0].Status; s != tlp.StatusUR {
			k.led.fail("LNK-4", "a request outstanding at link-down was completed with %v, want UR", s)
		} else {
			k.led.pass("LNK-4", "requests outstanding at link-down answered UR")
		}
	}
	k.deaf, k.silent = false, false
	if err := k.begin(defaultAdvert()); err != nil {
		return err
	}
	if err := k.watch(3 * k.timers.Slack); err != nil {
		return err
	}
	switch {
	case k.iut.Session == old:
		k.led.fail("LNK-5", "the IUT came back with its old session %#x", old)
	case k.iut.ISN == oldISN:
		k.led.fail("LNK-5", "the new session reuses the old ISN %#x", oldISN)
	case len(k.cpls) > 0 || len(k.inbox) > 0:
		k.led.fail("LNK-5", "%d TLPs of the old session were sent in the new one", len(k.cpls)+len(k.inbox))
	default:
		k.led.pass("LNK-5", "a new session with a new ISN; nothing of the old one resent")
	}
	return nil
}
