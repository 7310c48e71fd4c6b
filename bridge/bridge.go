package bridge

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
)

// State is the link state of a bridge.
type State uint8

// Link states.
const (
	// StateInit: never up yet; HELLOs go out, HandleTLP answers ErrNotUp.
	StateInit State = iota
	// StateUp: the handshake completed, TLPs flow.
	StateUp
	// StateDown: the link was up and went down; HELLOs go out, new
	// non-posted requests get UR, new posted TLPs are reported lost.
	StateDown
)

func (s State) String() string {
	switch s {
	case StateInit:
		return "init"
	case StateUp:
		return "up"
	case StateDown:
		return "down"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// ErrNotUp is returned by HandleTLP before the link first came up.
var ErrNotUp = errors.New("bridge: link not up yet")

// NoDeadline is what Deadline returns when no timer is armed.
const NoDeadline = time.Duration(math.MaxInt64)

const noDeadline = NoDeadline

// ClassMask selects flow-control classes the local side can accept now.
type ClassMask uint8

// Class masks.
const (
	AcceptPosted     ClassMask = 1 << tlp.Posted
	AcceptNonPosted  ClassMask = 1 << tlp.NonPosted
	AcceptCompletion ClassMask = 1 << tlp.Completion
	AcceptAll                  = AcceptPosted | AcceptNonPosted | AcceptCompletion
)

// synthCpl is a completion the bridge answers a request with itself.
type synthCpl struct {
	req, completer tlp.ID
	tag            uint16
	status         tlp.Status
	bc             int
	la             uint8
}

// Bridge is the state machine of one end of a host-GPU pair. It is not safe
// for concurrent use; drivers call it from one goroutine. See the package
// documentation for the protocol and its parts.
type Bridge struct {
	cfg Config
	tr  translator
	rng uint64
	now time.Duration

	state                State
	session, peerSession uint32
	peer                 encap.Control // the peer's HELLO of the current session
	peerKnown            bool
	helloDue             time.Duration
	helloAckPending      bool
	kaAcks               probeAnswers // KEEPALIVEs to answer, by probe number
	resetPending         bool
	resetReason          uint8
	resetEcho            uint32
	lastResetSent        time.Duration
	lastRecv, lastSent   time.Duration
	lastProbe            time.Duration
	probeSeq             uint8     // number of the latest RTO probe
	probePending         bool      // an RTO probe is due
	probesOut            probesOut // RTO probes awaiting their answers

	// Transmit side.
	txPool      pool
	pending     [NumClasses]fifo[meta]
	arrival     uint64
	retx        retransmitQueue
	rtt         rttEstimator
	rtoDeadline time.Duration
	credits     sendCredits
	txTags      tagTable
	// pendingBytes: what the pending TLPs take in a frame, length
	// fields included (FrameQueued).
	pendingBytes int
	// idle: pickNext found nothing to send, and since then no TLP was
	// queued, no credit limit moved and no queued request's tag ended, so
	// it would find nothing again. A pair stalled on credits calls
	// NextFrame often with nothing to send; this spares it the walk. (A
	// link down empties the queues: only a new TLP refills them.)
	idle bool

	// Receive side.
	rxPool        pool
	reorder       reorderWindow
	deliver       [NumClasses]fifo[meta]
	rxOrder       uint64
	rxTags        []tagEntry
	rxEpoch       uint32
	ackPending    bool
	ackNow        bool
	nakPending    bool
	nakSent       bool
	nakFor        uint32
	nakAt         time.Duration
	ackDeadline   time.Duration
	framesUnacked int
	creditDirty   bool
	creditDue     time.Duration
	buffers       recvCredits

	synth    fifo[synthCpl]
	synthBuf [tlp.Header3DW]byte

	events  []Event
	evHead  int
	lostBuf []uint64

	keys keyState // keyed pairs: the seal and its nonces

	ctr Counters
}

// New returns a bridge for cfg (defaults applied) in StateInit.
func New(cfg Config) (*Bridge, error) {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := cfg.Window
	txSlots, rxSlots := cfg.poolSlots()
	b := &Bridge{
		cfg: cfg,
		tr:  translator{m: append([]IDMapping(nil), cfg.IDMap...), convertType1: cfg.ConvertType1, downstreamBus: cfg.DownstreamBus},
		rng: cfg.Seed ^ 0x6a09e667f3bcc909 ^ uint64(cfg.Role)<<56 ^ uint64(cfg.PairID)<<32,
	}
	b.txPool = newPool(txSlots, cfg.maxTLP())
	for c := range b.pending {
		b.pending[c] = newFifo[meta](cfg.TxQueue)
	}
	b.retx = newRetransmitQueue(w)
	b.rtt = newRTT(cfg.InitialRTO, cfg.MinRTO, cfg.MaxRTO)
	b.txTags = newTagTable(8, cfg.MaxOutstanding)
	var depth [NumClasses]int
	b.buffers, depth = newRecvCredits(cfg.Credits, cfg.InfiniteQueue)
	for c := range b.deliver {
		b.deliver[c] = newFifo[meta](depth[c])
	}
	b.rxPool = newPool(rxSlots, cfg.maxTLP())
	b.reorder = newReorderWindow(w)
	b.rxTags = make([]tagEntry, 1024)
	b.synth = newFifo[synthCpl](2048 + cfg.TxQueue)
	var err error
	if b.keys, err = newKeys(&cfg); err != nil {
		return nil, err
	}
	b.cfg.Key = nil // the seal holds it; Config() must not hand it out
	b.newSession(0)
	return b, nil
}

// Config returns the configuration in use, defaults applied, without the
// pair key.
func (b *Bridge) Config() Config { return b.cfg }

// State returns the link state.
func (b *Bridge) State() State { return b.state }

// Session returns the current session nonce.
func (b *Bridge) Session() uint32 { return b.session }

// PeerMaxPayload returns the largest TLP payload the peer takes, from the
// TLP size its HELLO announced (its MaxPayload), or 0 while no peer is
// known.
func (b *Bridge) PeerMaxPayload() int {
	if !b.peerKnown {
		return 0
	}
	return int(b.peer.MaxTLP) - tlp.Header4DW - 4
}

// Counters returns a snapshot of the statistics.
func (b *Bridge) Counters() Counters {
	c := b.ctr
	c.TagsInUse = uint64(b.txTags.active)
	c.SRTT, c.RTO = b.rtt.srtt, b.rtt.rto
	b.sealCounters(&c)
	return c
}

// Outstanding returns the number of requests forwarded and not yet
// completed.
func (b *Bridge) Outstanding() int { return b.txTags.active }

// Pending returns the TLPs accepted from the local side and not yet
// acknowledged by the peer (queued or in flight).
func (b *Bridge) Pending() int {
	return b.queuedToSend() + b.retx.inFlight()
}

// queuedToSend counts the TLPs from the local side waiting to be sent.
func (b *Bridge) queuedToSend() int {
	n := 0
	for c := range b.pending {
		n += b.pending[c].len()
	}
	return n
}

// FrameQueued reports whether the TLPs waiting to be sent fill a TLP
// frame: a caller with more TLPs on the way (Runner.SendManyHeld) frames
// only then, so that a stream goes out in full frames.
func (b *Bridge) FrameQueued() bool {
	return b.pendingBytes >= b.cfg.frameBudget()-encap.HeaderLen
}

// Queued returns the TLPs (synthesized completions included) waiting for
// NextTLP.
func (b *Bridge) Queued() int {
	return b.queuedToDeliver() + b.synth.len()
}

// queuedToDeliver counts the TLPs from the fabric waiting for NextTLP.
func (b *Bridge) queuedToDeliver() int {
	n := 0
	for c := range b.deliver {
		n += b.deliver[c].len()
	}
	return n
}

// newSession starts a fresh session: nonce, initial sequence number, key
// nonce (keyed pairs; the session keys follow once the peer's is known),
// and the credits the receive buffers have room for now.
func (b *Bridge) newSession(now time.Duration) {
	for b.session = b.random(); b.session == 0 || b.session == b.peerSession; b.session = b.random() {
	}
	b.peerSession, b.peerKnown = 0, false
	b.retx.restart(b.random())
	if b.keys.ch != nil {
		b.keys.ch.EndSession()
		b.randomBytes(b.keys.nonce[:])
		b.keys.peer = [KeyNonceLen]byte{}
	}
	b.rtoDeadline = noDeadline
	b.rxEpoch++
	b.buffers.restart()
	b.helloDue = now
	b.helloAckPending = false
	b.kaAcks.reset()
	b.probePending = false
	b.probesOut.reset()
	b.ackPending, b.ackNow, b.nakPending, b.creditDirty = false, false, false, false
}

func (b *Bridge) pushEvent(e Event) {
	if b.evHead == len(b.events) {
		b.events, b.evHead = b.events[:0], 0
	}
	e.At = b.now
	b.events = append(b.events, e)
}

// NextEvent returns the next event, if any.
func (b *Bridge) NextEvent() (Event, bool) {
	if b.evHead == len(b.events) {
		return Event{}, false
	}
	e := b.events[b.evHead]
	b.events[b.evHead] = Event{}
	b.evHead++
	return e, true
}

// Deadline returns when HandleTimeout (or NextFrame) must next be called;
// NoDeadline when nothing is armed.
func (b *Bridge) Deadline() time.Duration {
	d := b.txTags.nextCheck
	if b.keys.ch != nil {
		if r, ok := b.keys.ch.Deadline(); ok {
			d = min(d, r)
		}
	}
	if b.state != StateUp {
		return min(d, b.helloDue)
	}
	if b.ackPending {
		d = min(d, b.ackDeadline)
	}
	if b.creditDirty {
		d = min(d, b.creditDue)
	}
	d = min(d, b.rtoDeadline, b.lastSent+b.cfg.Keepalive, b.lastRecv+b.cfg.DeadAfter)
	if b.reorder.held > 0 && b.nakSent {
		d = min(d, b.nakAt+b.renakAfter())
	}
	if b.probing() {
		d = min(d, b.lastProbe+b.rtt.rto)
	}
	return d
}

// probing: TLPs wait for credits while nothing is in flight to bring an
// update, so KEEPALIVEs probe for one every RTO.
func (b *Bridge) probing() bool {
	return b.retx.empty() && b.credits.anyStalled()
}

// HandleTimeout runs the timers due at now: silence detection, completion
// timeouts, retransmission timeout. NextFrame, HandleFrame and HandleTLP
// call it too.
func (b *Bridge) HandleTimeout(now time.Duration) {
	if now > b.now {
		b.now = now
	}
	now = b.now
	if b.state == StateUp && now-b.lastRecv >= b.cfg.DeadAfter {
		b.goDown(now, "peer silent for "+sim.FormatDuration(now-b.lastRecv), encap.ResetLinkDown)
	}
	if now >= b.txTags.nextCheck {
		b.scanTags(now)
	}
	if b.state == StateUp && b.rtoDeadline != noDeadline && now >= b.rtoDeadline {
		b.onRTO(now)
	}
	if b.state == StateUp && b.reorder.held > 0 && b.nakSent && now-b.nakAt >= b.renakAfter() {
		// The hole outlived its NAK: the retransmission was lost too.
		b.nakPending, b.nakAt = true, now
	}
	if b.keys.ch != nil {
		b.keys.ch.Tick(now) // retires the peer's previous key after RekeyGraceTime
	}
}

// scanTags synthesizes CA for requests past the completion timeout and ends
// the quarantine of stale tags.
func (b *Bridge) scanTags(now time.Duration) {
	b.idle = false // a queued request may time out
	b.txTags.expire(now, b.cfg.CompletionTimeout, func(e *tagEntry) {
		b.ctr.CompletionTimeouts++
		b.ctr.SynthesizedCA++
		b.pushSynth(synthCpl{req: e.origReq, completer: e.completer, tag: e.origTag, status: tlp.StatusCA, bc: e.remaining, la: e.nextLA})
		b.pushEvent(Event{Kind: EventCompletionTimeout, RequesterID: e.origReq, Tag: e.origTag})
	})
}

func (b *Bridge) pushSynth(s synthCpl) {
	if !b.synth.push(s) {
		// Cannot happen with the sizes New picks; never drop silently.
		b.ctr.CompletionsLost++
	}
}

func (b *Bridge) onRTO(now time.Duration) {
	b.ctr.RTOs++
	// Ask before resending: a KEEPALIVE probe goes out at once, and its
	// KEEPALIVE-ACK acknowledges everything the peer got before it (frames
	// keep their order on a link), so exactly the TLPs still missing then
	// are sent again (see onProbeAck). A late ack costs one probe, not a
	// window of duplicates.
	b.probeSeq++
	if b.probeSeq == 0 {
		b.probeSeq = 1
	}
	b.probePending = true
	b.rtt.backoff()
	b.rtoDeadline = now + b.rtt.rto
}

// onProbeAck takes the answer to RTO probe seq (any still out: see
// probesOut) and resends every TLP sent before that probe that is still
// neither acknowledged nor selectively acknowledged, as far as the SACK
// bitmap of that answer can tell.
func (b *Bridge) onProbeAck(seq uint8, ack uint32) {
	if txOrder, ok := b.probesOut.answer(seq); ok {
		b.retx.markSentBefore(ack, txOrder)
	}
}

// goDown ends the session: every forwarded request gets UR, unacknowledged
// posted TLPs are reported lost, unacknowledged completions dropped (their
// requester's bridge answers them), and a new session starts handshaking.
// TLPs already received and queued for the local side stay deliverable.
func (b *Bridge) goDown(now time.Duration, reason string, resetReason uint8) {
	wasUp := b.state == StateUp
	b.state = StateDown
	if wasUp {
		b.ctr.LinkDowns++
		b.pushEvent(Event{Kind: EventLinkDown, Session: b.session, Reason: reason})
		if b.cfg.Role == RoleHost {
			b.pushEvent(Event{Kind: EventSurpriseRemoval, Session: b.session, Reason: reason})
		}
	}
	// Requests in flight or queued.
	b.txTags.abort(func(e *tagEntry) {
		b.ctr.SynthesizedUR++
		b.pushSynth(synthCpl{req: e.origReq, completer: e.completer, tag: e.origTag, status: tlp.StatusUR, bc: e.remaining, la: e.nextLA})
	})
	lost := b.lostBuf[:0]
	nLost := 0
	drop := func(m *meta) {
		switch m.class {
		case tlp.Posted:
			nLost++
			if m.hasAddr {
				lost = append(lost, m.addr)
			}
		case tlp.Completion:
			b.ctr.CompletionsLost++
		}
		b.txPool.put(m.slot)
	}
	b.retx.clear(drop)
	// Queued TLPs after those in flight, in arrival order per class.
	for c := range b.pending {
		for b.pending[c].len() > 0 {
			m := b.pending[c].pop()
			drop(&m)
		}
	}
	b.pendingBytes = 0
	b.credits.stalled = [NumClasses]bool{}
	if nLost > 0 {
		b.ctr.PostedLost += uint64(nLost)
		b.pushEvent(Event{Kind: EventPostedLost, Count: nLost, Addrs: append([]uint64(nil), lost...)})
	}
	b.lostBuf = lost[:0]
	b.reorder.restart(b.reorder.next, &b.rxPool)
	if wasUp && resetReason != 0 {
		b.resetPending, b.resetReason, b.resetEcho = true, resetReason, b.peerSession
	}
	b.newSession(now)
}

// Reset tears the session down on purpose (as if the link had gone down)
// and tells the peer with a RESET; both sides then handshake a new session.
func (b *Bridge) Reset(now time.Duration) {
	b.HandleTimeout(now)
	if b.state == StateUp {
		b.goDown(b.now, "reset requested", encap.ResetAdmin)
	}
}

// HandleTLP takes a TLP from the local PCIe side. The bytes are copied. It
// returns ErrBusy when the class queue (or, for a non-posted request, the
// tag table) is full: offer it again after the bridge made progress; and
// ErrNotUp before the link first came up. While the link is down a
// non-posted request is answered with UR, a posted one reported lost.
func (b *Bridge) HandleTLP(now time.Duration, t []byte) error {
	b.HandleTimeout(now)
	v, err := tlp.Parse(t)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMalformedTLP, err)
	}
	if len(t) > b.cfg.maxTLP() {
		return fmt.Errorf("%w: %d bytes exceed the %d-byte maximum (MaxPayload %d)", ErrMalformedTLP, len(t), b.cfg.maxTLP(), b.cfg.MaxPayload)
	}
	k := v.Kind()
	c := k.Class()
	switch b.state {
	case StateInit:
		return ErrNotUp
	case StateDown:
		return b.refuseDown(v, k)
	}
	if len(t) > int(b.peer.MaxTLP) {
		return fmt.Errorf("%w: %w: %d bytes exceed the %d-byte TLPs the peer accepts", ErrMalformedTLP, ErrPeerTLPSize, len(t), b.peer.MaxTLP)
	}
	if b.pending[c].full() {
		return ErrBusy
	}
	var w uint16
	if c == tlp.NonPosted {
		var ok bool
		if w, ok = b.txTags.alloc(); !ok {
			b.ctr.TagStalls++
			return ErrBusy
		}
		b.ctr.TagsHighWater = max(b.ctr.TagsHighWater, uint64(b.txTags.active))
	}
	slot := b.txPool.get()
	buf := b.txPool.bytes(slot, len(t))
	copy(buf, t)
	tv := tlp.View(buf)
	origReq, origTag := tv.RequesterID(), tv.Tag()
	var origTarget tlp.ID
	if k.IsConfig() {
		origTarget = tv.TargetID()
	}
	b.tr.outbound(tv)
	var gen uint32 // non-posted: the generation of tag w
	switch c {
	case tlp.Completion:
		e := &b.rxTags[tv.Tag()]
		r := cplNoMatch
		if e.epoch == b.rxEpoch {
			r = account(e, tv, e.wireReq, &b.ctr.ByteCountMismatches)
		}
		if r != cplMore && r != cplLast {
			b.ctr.UnmatchedCompletions++
			b.txPool.put(slot)
			return nil
		}
		if r == cplLast {
			e.state = tagFree
		}
	case tlp.NonPosted:
		e := &b.txTags.entries[w]
		setRequest(e, tv)
		e.origReq, e.origTag = origReq, origTag
		e.wireReq = tv.RequesterID()
		e.completer = b.cfg.PeerID
		if k.IsConfig() {
			e.completer = origTarget
		}
		e.start = now
		b.txTags.nextCheck = min(b.txTags.nextCheck, now+b.cfg.CompletionTimeout)
		tv.SetTag(w)
		gen = e.gen
	}
	fixECRC(tv)
	m := b.pending[c].grow() // not full: checked above
	m.fill(tv, slot)
	if c == tlp.NonPosted {
		m.wireTag, m.gen = int32(w), gen
	}
	m.order = b.arrival
	b.arrival++
	b.pendingBytes += 2 + int(m.n)
	b.idle = false
	b.ctr.TLPsFromLocal++
	return nil
}

func (b *Bridge) refuseDown(v tlp.View, k tlp.Kind) error {
	switch k.Class() {
	case tlp.NonPosted:
		e := tagEntry{}
		setRequest(&e, v)
		comp := b.cfg.PeerID
		if k.IsConfig() {
			comp = v.TargetID()
		}
		if b.synth.full() {
			return ErrBusy
		}
		b.ctr.SynthesizedUR++
		b.pushSynth(synthCpl{req: v.RequesterID(), completer: comp, tag: v.Tag(), status: tlp.StatusUR, bc: e.remaining, la: e.nextLA})
	case tlp.Posted:
		b.ctr.PostedLost++
		ev := Event{Kind: EventPostedLost, Count: 1, Reason: "link down"}
		if k == tlp.MWr {
			ev.Addrs = []uint64{v.Address()}
		}
		b.pushEvent(ev)
	case tlp.Completion:
		b.ctr.CompletionsLost++
	}
	return nil
}

// hasCredits reports whether the peer advertised room for m.
func (b *Bridge) hasCredits(m *meta) bool { return b.credits.allows(m.class, dataUnits(m)) }

// pickNext returns the class whose head goes next, and its index in that
// queue: the oldest head that has credits and may pass everything queued
// before it; -1 if none. Posted requests and completions thereby pass
// non-posted requests stalled on credits, and nothing passes a posted
// request it must not. A completion queue whose head is held behind a
// posted request lets a later completion with RO (or IDO, or for an
// IO/config write) go first.
func (b *Bridge) pickNext() (int, int) {
	best, bestIdx := -1, 0
	for c := range b.pending {
		q := &b.pending[c]
		for c == int(tlp.NonPosted) && q.len() > 0 {
			h := q.peek()
			e := &b.txTags.entries[h.wireTag]
			if e.state == tagActive && e.gen == h.gen {
				break
			}
			// Timed out while queued: its CA is delivered, never send it.
			m := q.pop()
			b.pendingBytes -= 2 + int(m.n)
			b.txPool.put(m.slot)
			b.ctr.StaleRequestsDropped++
		}
		if q.len() == 0 {
			continue
		}
		h := q.peek()
		idx := 0
		if mustWait(h, &b.pending[tlp.Posted]) {
			if c != int(tlp.Completion) {
				continue
			}
			if idx = passingCompletion(q, &b.pending[tlp.Posted], b.hasCredits); idx < 0 {
				continue
			}
			h = q.at(idx)
		}
		if best >= 0 && b.pending[best].at(bestIdx).order < h.order {
			continue
		}
		if !b.credits.allows(h.class, dataUnits(h)) {
			if b.credits.stall(tlp.Class(c)) {
				b.ctr.CreditStalls[c]++
			}
			continue
		}
		best, bestIdx = c, idx
	}
	return best, bestIdx
}

// DebugString describes the internal state, for logs of failing runs.
func (b *Bridge) DebugString() string {
	var pending, deliver [NumClasses]int
	for c := range pending {
		pending[c], deliver[c] = b.pending[c].len(), b.deliver[c].len()
	}
	r := &b.buffers
	return fmt.Sprintf("%v session %#x peer %#x snd una %#x nxt %#x win %d retx %d rto@%s pending %v stalled %v limit %v consumed %v inf %#x | rcv next %#x sack %#x deliver %v held %v/%v adv %v+%v cap %v/%v synth %d tags %d",
		b.state, b.session, b.peerSession, b.retx.una, b.retx.nxt, b.retx.limit, b.retx.marked, sim.FormatDuration(b.rtoDeadline),
		pending, b.credits.stalled, b.credits.limit, b.credits.consumed, b.credits.infinite,
		b.reorder.next, b.reorder.sack(), deliver, r.heldHdr, r.heldData, r.base, r.released, r.capHdr, r.capData, b.synth.len(), b.txTags.active)
}
