package conform

import (
	"github.com/dxpu/dxpu/bridge/nettlpside"
	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
)

const needTarget = "needs the test target (--doorbell, section 12.1) or the kit in control of the local side (Options.Stub)"

func init() {
	scenarios = append(scenarios, scenario{"test-target", (*kit).testTarget})
}

// testTarget judges, through the IUT's test target (Options.Doorbell), the
// rules that need its local side to issue requests: TAG-1, TAG-2 and
// TAG-5 (tags of many reads), ORD-1 (its writes in order), ORD-2 and
// ORD-4 (passing stalled traffic), TAG-4 and TAG-3 (a completion timeout
// and the late completion), LNK-4 (a read outstanding at link-down). With
// the stub in control, the stub scenarios judged these already.
func (k *kit) testTarget() error {
	if k.stub != nil {
		return nil
	}
	if k.opt.Doorbell == nil {
		for _, id := range []string{"ORD-2", "ORD-4", "TAG-1", "TAG-2", "TAG-4", "TAG-5", "LNK-4"} {
			k.led.na(id, needTarget)
		}
		return nil
	}
	for _, step := range []func() error{k.targetTags, k.targetOrdering, k.targetTimeout, k.targetLinkDown} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// cmdNumber numbers the kit's doorbell commands.
func (k *kit) ring(c nettlpside.DoorbellCommand) (nettlpside.DoorbellCommand, error) {
	k.cmdNo++
	c.Number = k.cmdNo
	_, err := k.sendTLPs(memWrite(k.kitID, *k.opt.Doorbell, c.AppendTo(nil)))
	return c, err
}

// targetStatus reads the test target's status block back.
func (k *kit) targetStatus() (nettlpside.DoorbellStatus, bool, error) {
	tag := k.newTag()
	if _, err := k.sendTLPs(memRead(k.kitID, tag, *k.opt.Doorbell+nettlpside.DoorbellStatusOff, nettlpside.DoorbellStatusLen)); err != nil {
		return nettlpside.DoorbellStatus{}, false, err
	}
	ok, err := k.await(k.reply(), func() bool { return k.completions(tag) > 0 })
	if err != nil || !ok {
		return nettlpside.DoorbellStatus{}, false, err
	}
	var data []byte
	for _, c := range k.cpls {
		if v := c.view(); v.Tag() == tag {
			data = append(data, v.Payload()...)
		}
	}
	s, err := nettlpside.ParseDoorbellStatus(data)
	if err != nil {
		return s, false, mismatch("the test target's status block at %#x reads back as %d bytes: is --doorbell %#x the implementation's test target?", *k.opt.Doorbell+nettlpside.DoorbellStatusOff, len(data), *k.opt.Doorbell)
	}
	return s, true, nil
}

// targetRequests returns the IUT's requests that arrived for addresses
// at..at+n*stride, by index (missing ones absent).
func (k *kit) targetRequests(at, stride uint64, n int) map[int]rxTLP {
	out := map[int]rxTLP{}
	for _, r := range k.inbox {
		v := r.view()
		if !v.Kind().IsRequest() || v.Address() < at {
			continue
		}
		if off := v.Address() - at; off%stride == 0 && off/stride < uint64(n) {
			out[int(off/stride)] = r
		}
	}
	return out
}

func (k *kit) targetTags() error {
	if err := k.begin(defaultAdvert()); err != nil {
		return err
	}
	// Many reads: all forwarded (TAG-5), tags unique and in the kit's
	// space (TAG-1, TAG-2: judged as they arrive), completions restored to
	// the requester's own tags (TAG-1: the target records SC only for
	// completions carrying its own tag and requester ID).
	const n = nettlpside.DoorbellMaxCount
	at, stride := uint64(kitMemory+0x10000), uint64(64)
	cmd, err := k.ring(nettlpside.DoorbellCommand{Op: nettlpside.DoorbellOpRead, Count: n, Bytes: 4, Addr: at, Stride: stride})
	if err != nil {
		return err
	}
	// Answer as they come: the IUT may have fewer tags than n.
	answered := map[int]bool{}
	ok, err := k.await(k.reply()+k.timers.CompletionTimeout/2, func() bool {
		for i, r := range k.targetRequests(at, stride, n) {
			if !answered[i] {
				answered[i] = true
				if k.complete(r) != nil {
					return true
				}
			}
		}
		return len(answered) == n
	})
	if err != nil {
		return err
	}
	if !ok && len(answered) == 0 {
		// Nothing at all: a test target that never took the command is
		// the kit's setting (--doorbell), not a rule broken.
		st, stOK, err := k.targetStatus()
		if err != nil {
			return err
		}
		if !stOK || st.Number != cmd.Number {
			return mismatch("no test target took command %d at --doorbell %#x (its status block names command %d): is that the implementation's test target?", cmd.Number, *k.opt.Doorbell, st.Number)
		}
	}
	if !ok {
		k.led.fail("TAG-5", "%d of the %d reads of test-target command %d arrived within %v", len(answered), n, cmd.Number, k.reply())
		return nil
	}
	k.led.pass("TAG-5", "%d reads issued by the test target forwarded, none dropped", n)
	var st nettlpside.DoorbellStatus
	done := func() bool { return st.Number == cmd.Number && st.Completed >= n }
	for end := k.now() + k.reply(); !done() && k.now() < end; {
		if st, ok, err = k.targetStatus(); err != nil || !ok {
			return err
		}
		if !done() {
			if err := k.watch(k.timers.Slack); err != nil {
				return err
			}
		}
	}
	bad := -1
	for i := 0; i < n; i++ {
		if st.Status[i] != byte(tlp.StatusSC) {
			bad = i
			break
		}
	}
	switch {
	case st.Number != cmd.Number:
		return mismatch("the test target at --doorbell %#x did not take command %d (its status names %d)", *k.opt.Doorbell, cmd.Number, st.Number)
	case bad >= 0 && st.Status[bad] == nettlpside.DoorbellWrongData:
		k.led.fail("TAG-1", "read %d of the test target (its own tag %d) got another read's data: completions were not restored to the right tag", bad, bad)
	case bad >= 0:
		k.led.fail("TAG-1", "read %d of the test target (its own tag %d) got status %#x, want SC: its completion did not come back with its own tag and requester ID", bad, bad, st.Status[bad])
	default:
		k.led.pass("TAG-1", "the test target got all %d completions with its own tags", n)
	}

	// Its writes arrive in the order issued.
	wat := uint64(kitMemory + 0x20000)
	wc, err := k.ring(nettlpside.DoorbellCommand{Op: nettlpside.DoorbellOpWrite, Count: 8, Bytes: 8, Addr: wat, Stride: 8})
	if err != nil {
		return err
	}
	if ok, err := k.await(k.reply(), func() bool { return len(k.targetRequests(wat, 8, 8)) == 8 }); err != nil || !ok {
		k.led.fail("ORD-1", "%d of the test target's 8 writes arrived within %v", len(k.targetRequests(wat, 8, 8)), k.reply())
		return err
	}
	ws := k.targetRequests(wat, 8, 8)
	for i := 1; i < 8; i++ {
		if seqLT(ws[i].seq, ws[i-1].seq) {
			k.led.fail("ORD-1", "the test target's write %d (TLP %#x) was sent before its write %d (TLP %#x)", i, ws[i].seq, i-1, ws[i-1].seq)
			return nil
		}
	}
	for i := 0; i < 8; i++ {
		if p := ws[i].view().Payload(); len(p) != 8 || p[0] != nettlpside.DoorbellData(wc.Number, i, 0) {
			return mismatch("the test target's write %d carries % x, not the data of command %d: is --doorbell the implementation's test target?", i, p, wc.Number)
		}
	}
	k.led.pass("ORD-1", "the test target's 8 writes sent in the order issued")
	return nil
}

// targetOrdering judges ORD-2 (a write and a completion pass a read
// stalled on the kit's non-posted credits) and ORD-4 (a completion does
// not pass a write stalled on the kit's posted credits).
func (k *kit) targetOrdering() error {
	a := defaultAdvert()
	a.credits[encap.CreditNPH] = 1
	if err := k.begin(a); err != nil {
		return err
	}
	rat := uint64(kitMemory + 0x30000)
	if _, err := k.ring(nettlpside.DoorbellCommand{Op: nettlpside.DoorbellOpRead, Count: 2, Bytes: 4, Addr: rat, Stride: 64}); err != nil {
		return err
	}
	if ok, err := k.await(k.reply(), func() bool { return len(k.targetRequests(rat, 64, 2)) >= 1 }); err != nil || !ok {
		k.led.na("ORD-2", "the test target's first read did not arrive")
		return err
	}
	// The second read waits for a non-posted credit the kit withholds.
	wat := uint64(kitMemory + 0x31000)
	if _, err := k.ring(nettlpside.DoorbellCommand{Op: nettlpside.DoorbellOpWrite, Count: 1, Bytes: 4, Addr: wat, Stride: 4}); err != nil {
		return err
	}
	ty := k.newTag()
	if _, err := k.sendTLPs(memRead(k.kitID, ty, k.addr(0), 4)); err != nil {
		return err
	}
	ok, err := k.await(k.reply(), func() bool { return len(k.targetRequests(wat, 4, 1)) == 1 && k.completions(ty) > 0 })
	if err != nil {
		return err
	}
	switch {
	case len(k.targetRequests(rat, 64, 2)) == 2:
		k.led.na("ORD-2", "the second read was not stalled on the kit's one non-posted credit")
	case !ok:
		k.led.fail("ORD-2", "a write and a completion stayed behind a read stalled on credits for %v", k.reply())
	default:
		k.led.pass("ORD-2", "a write and a completion passed a read of the test target stalled on credits")
	}
	// Release the stalled read: one credit at a time, as the kit's
	// limits never run further ahead of its buffers than its initial
	// credits (CRD-4, which the IUT may enforce).
	answered := map[int]bool{}
	if _, err := k.await(k.reply(), func() bool {
		for i, r := range k.targetRequests(rat, 64, 2) {
			if !answered[i] {
				answered[i] = true
				_ = k.complete(r)
				k.adv[encap.CreditNPH]++
				_ = k.sendCredit()
			}
		}
		return len(answered) == 2
	}); err != nil {
		return err
	}

	// ORD-4: one posted credit; the second write stalls, a completion
	// must wait behind it.
	a = defaultAdvert()
	a.credits[encap.CreditPH] = 1
	if err := k.begin(a); err != nil {
		return err
	}
	pat := uint64(kitMemory + 0x32000)
	if _, err := k.ring(nettlpside.DoorbellCommand{Op: nettlpside.DoorbellOpWrite, Count: 2, Bytes: 4, Addr: pat, Stride: 4}); err != nil {
		return err
	}
	if ok, err := k.await(k.reply(), func() bool { return len(k.targetRequests(pat, 4, 2)) >= 1 }); err != nil || !ok {
		k.led.na("ORD-4", "the test target's first write did not arrive")
		return err
	}
	if err := k.watch(k.timers.Slack); err != nil {
		return err
	}
	tx := k.newTag()
	if _, err := k.sendTLPs(memRead(k.kitID, tx, k.addr(0), 4)); err != nil {
		return err
	}
	if err := k.watch(min(3*k.timers.Slack, k.timers.DeadAfter/4)); err != nil {
		return err
	}
	if len(k.targetRequests(pat, 4, 2)) < 2 && k.completions(tx) > 0 {
		k.led.fail("ORD-4", "a completion passed a write of the test target stalled on credits")
		return nil
	}
	k.adv[encap.CreditPH]++ // one at a time (CRD-4)
	if err := k.sendCredit(); err != nil {
		return err
	}
	if ok, err := k.await(k.reply(), func() bool { return len(k.targetRequests(pat, 4, 2)) == 2 && k.completions(tx) > 0 }); err != nil {
		return err
	} else if !ok {
		k.led.fail("CRD-6", "the test target's write and the completion did not follow within %v of a credit update", k.reply())
	} else {
		w := k.targetRequests(pat, 4, 2)[1]
		if c, _ := k.completion(tx); seqLT(c.seq, w.seq) {
			k.led.fail("ORD-4", "completion %#x sent before the earlier write %#x", c.seq, w.seq)
		} else {
			k.led.pass("ORD-4", "a completion waited for a write of the test target stalled on credits")
		}
	}
	return nil
}

// targetTimeout judges TAG-4 (an unanswered read of the test target gets
// CA after CompletionTimeout, not before) and TAG-3 (its late completion
// does not reach the requester).
func (k *kit) targetTimeout() error {
	if err := k.begin(defaultAdvert()); err != nil {
		return err
	}
	at := uint64(kitMemory + 0x40000)
	cmd, err := k.ring(nettlpside.DoorbellCommand{Op: nettlpside.DoorbellOpRead, Count: 1, Bytes: 4, Addr: at, Stride: 4})
	if err != nil {
		return err
	}
	if ok, err := k.await(k.reply(), func() bool { return len(k.targetRequests(at, 4, 1)) == 1 }); err != nil || !ok {
		k.led.na("TAG-4", "the test target's read did not arrive")
		return err
	}
	req := k.targetRequests(at, 4, 1)[0]
	ct := k.timers.CompletionTimeout
	if early := ct / 2; early > 2*k.timers.Slack {
		if err := k.watch(early - k.timers.Slack); err != nil {
			return err
		}
		st, ok, err := k.targetStatus()
		if err != nil || !ok {
			return err
		}
		if st.Number == cmd.Number && st.Status[0] != nettlpside.DoorbellPending && k.elapsed(req.at, k.now()) < ct-k.timers.Slack {
			k.led.fail("TAG-4", "the unanswered read was completed (status %#x) after %v, before the completion timeout %v", st.Status[0], k.elapsed(req.at, k.now()), ct)
			return nil
		}
	}
	var st nettlpside.DoorbellStatus
	for end := req.at + ct + k.reply(); k.now() < end; {
		var ok bool
		if st, ok, err = k.targetStatus(); err != nil || !ok {
			return err
		}
		if st.Number == cmd.Number && st.Status[0] != nettlpside.DoorbellPending {
			break
		}
		if err := k.watch(max(ct/10, k.timers.Slack)); err != nil {
			return err
		}
	}
	switch {
	case st.Number != cmd.Number || st.Status[0] == nettlpside.DoorbellPending:
		k.led.fail("TAG-4", "a read left unanswered got no completion within %v (CompletionTimeout %v)", ct+k.reply(), ct)
		return nil
	case st.Status[0] != byte(tlp.StatusCA):
		k.led.fail("TAG-4", "the unanswered read was completed with status %#x, want CA (4)", st.Status[0])
		return nil
	}
	k.led.pass("TAG-4", "an unanswered read of the test target completed with CA after the completion timeout")
	done := st.Completed
	if err := k.complete(req); err != nil {
		return err
	}
	if err := k.watch(3 * k.timers.Slack); err != nil {
		return err
	}
	st, ok, err := k.targetStatus()
	if err != nil || !ok {
		return err
	}
	if st.Completed != done {
		k.led.fail("TAG-3", "a late completion of a timed-out request reached the requester (the test target counted %d completions, %d before)", st.Completed, done)
	} else {
		k.led.pass("TAG-3", "a late completion of a timed-out request was dropped")
	}
	return nil
}

// targetLinkDown judges LNK-4: a read of the test target outstanding when
// the kit resets the session is answered UR.
func (k *kit) targetLinkDown() error {
	if err := k.begin(defaultAdvert()); err != nil {
		return err
	}
	at := uint64(kitMemory + 0x50000)
	cmd, err := k.ring(nettlpside.DoorbellCommand{Op: nettlpside.DoorbellOpRead, Count: 1, Bytes: 4, Addr: at, Stride: 4})
	if err != nil {
		return err
	}
	if ok, err := k.await(k.reply(), func() bool { return len(k.targetRequests(at, 4, 1)) == 1 }); err != nil || !ok {
		k.led.na("LNK-4", "the test target's read did not arrive")
		return err
	}
	old := k.iut.Session
	k.expectRenew = true
	if err := k.send(k.control(encap.Control{Type: encap.CtlReset, Reason: encap.ResetAdmin, PeerSession: old})); err != nil {
		return err
	}
	if err := k.begin(defaultAdvert()); err != nil {
		return err
	}
	var st nettlpside.DoorbellStatus
	for end := k.now() + k.reply(); k.now() < end; {
		var ok bool
		if st, ok, err = k.targetStatus(); err != nil || !ok {
			return err
		}
		if st.Number == cmd.Number && st.Status[0] != nettlpside.DoorbellPending {
			break
		}
		if err := k.watch(k.timers.Slack); err != nil {
			return err
		}
	}
	switch s := st.Status[0]; {
	case st.Number != cmd.Number || s == nettlpside.DoorbellPending:
		k.led.fail("LNK-4", "a read outstanding when the session was reset got no completion within %v", k.reply())
	case s != byte(tlp.StatusUR):
		k.led.fail("LNK-4", "a read outstanding when the session was reset was completed with status %#x, want UR (1)", s)
	default:
		k.led.pass("LNK-4", "a read of the test target outstanding at link-down answered UR")
	}
	return nil
}
