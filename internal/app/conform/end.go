package conform

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
)

// end is the kit's end of the pair, sans-I/O: observe takes a frame from
// the implementation under test (the IUT) and the time it arrived, due
// returns the frames the kit owes at a time, and the builders make the
// frames scenarios send. The generic checks every frame must pass (the
// monitor) run in observe and report to the ledger; nothing in a frame
// from the IUT can make the kit panic.
type end struct {
	led    *ledger
	role   encap.Role // the kit's role
	pair   uint32
	exact  bool // frames are UDP payloads: their length is exactly header + body
	rng    *rand.Rand
	timers Timers
	kitID  tlp.ID
	// stalled returns how long the kit itself was stalled in a span of
	// its time (nil: never); judged bounds leave it out.
	stalled func(from, to time.Duration) time.Duration
	// keys is the seal layer of a keyed pair (nil: unkeyed).
	keys *keyed

	// The kit's session and its transmit side.
	session, isn   uint32
	sndNxt, sndUna uint32
	replay         map[uint32][]byte // TLPs by sequence number until acknowledged
	kitConsumed    [encap.NumCreditTypes]uint32
	sentAt         map[uint32]time.Duration // zero: allocated, never sent (a hole on purpose)
	adv            [encap.NumCreditTypes]uint32
	advInf         uint8
	window         uint16
	tagBits        uint8
	maxTLP         uint16
	up             bool // the IUT echoed the kit's session
	echoDue        bool // a HELLO-ACK is owed
	helloDue       time.Duration
	lastSent       time.Duration
	ackDue, nakDue bool
	nakFor         uint32
	kaAckDue       bool
	kaAckProbe     uint8
	nextTag        int
	kaProbe        uint8
	reqs           map[uint16]kitReq // the kit's requests to the IUT by tag
	cpls           []rxTLP           // completions the IUT returned, in order

	// Behaviour switches that scenarios set.
	deaf      bool // frames take no effect: the link is cut
	silent    bool // send nothing (together with deaf: an outage)
	waitProbe bool // send nothing until the IUT sends a KEEPALIVE, then answer it
	quiet     bool // send nothing but answers to the IUT's KEEPALIVEs (measuring its Keepalive)
	dropTLPs  int  // TLP frames still to lose on purpose
	// keepHole: the next TLP frame lost on purpose opens a hole at its
	// first TLP, and its retransmissions are lost too until a TLP behind
	// it arrives: the hole the kit NAKs does not depend on the kit asking
	// for that TLP before the IUT's RTO resends the lost one.
	keepHole    bool
	hole        uint32
	noRetx      bool // the kit does not retransmit (it pretends acknowledged TLPs are gone)
	dropped     map[uint32][]byte
	expectRenew bool // the kit started a session: a new IUT session is expected

	// The IUT as the kit sees it.
	iut         encap.Control // its HELLO or HELLO-ACK of the current session
	iutKnown    bool
	iutUp       bool // it sent a frame with valid Ack and credits
	prevIUT     uint32
	sessions    map[uint32]string // the IUT's session nonces, to the scenario that saw each first
	kitSessions map[uint32]string // the kit's own, likewise
	restarts    int               // IUT sessions the kit did not ask for
	restartAt   time.Duration     // when the latest of them was first seen while the kit was deaf
	rcvNext     uint32
	held        map[uint32][]byte
	consumed    [encap.NumCreditTypes]uint32
	tags        map[uint16]iutReq // the IUT's requests outstanding at the kit, by wire tag
	inbox       []rxTLP           // TLPs from the IUT in sequence order, other than completions
	lastAck     uint32
	ackSeen     bool
	lim         [encap.NumCreditTypes]uint32
	limSeen     bool
	acks        int      // frames with a valid Ack received this session
	naks        []uint32 // NAKs not yet acted on
	nakLog      []uint32 // every NAK's Ack this session
	kitNakAt    time.Duration
	deliveredAt map[uint32]time.Duration
	delivLast   time.Duration
	kaAcks      map[uint8]time.Duration
	kaSent      map[uint8]bool // probe numbers the kit sent (0: its periodic KEEPALIVEs)
	kaStrays    int            // KEEPALIVE-ACKs with a probe number the kit never sent
	probeMiss   string         // what the IUT did while the latest unanswered probe waited
	keepalives  int
	kaTimes     []time.Duration // arrival of the IUT's KEEPALIVEs this session
	hellos      int
	resets      []encap.Control
	lastFrame   time.Duration
	lastKind    string
	// unopened counts the frames of a keyed IUT since lastFrame that did
	// not open (unopenedWhy: the latest's reason): an LNK-1 silence
	// names them, telling a quiet IUT from one the kit could not read.
	unopened    int
	unopenedWhy string
	// arrived counts every frame from the IUT, opened or not; unsealed
	// those a keyed kit got unsealed, the first at firstUnsealed: frames
	// that came but never opened are not "no frame" (Run).
	arrived       int
	unsealed      int
	firstUnsealed time.Duration
	frames        int
	badFrames     int

	// Round two (rules_more.go, scenarios_more.go).
	mtu      int    // largest frame from the dxpu header on (FRM-3)
	iutNext  uint32 // the IUT's next new sequence number as far as seen (FRM-11)
	resent   int    // TLPs the kit sent again (SEQ-4)
	helloTo  uint32 // peer session of the IUT's latest HELLO (LNK-8)
	helloAck bool   // the IUT sent a HELLO-ACK since the kit last cleared it (HSK-6)
	sackAck  uint32 // Ack and SACK bits of the IUT's latest frame with SACK (SEQ-4)
	sackBits uint32
	cmdNo    uint32 // the kit's latest test-target command
}

// kitReq is a request the kit sent to the IUT.
type kitReq struct {
	seq  uint32
	kind tlp.Kind
	at   time.Duration
}

// iutReq is a request of the IUT outstanding at the kit.
type iutReq struct {
	seq uint32
	at  time.Duration
	req []byte
}

// rxTLP is a TLP from the IUT, copied.
type rxTLP struct {
	seq uint32
	at  time.Duration
	b   []byte
}

func (r rxTLP) view() tlp.View { return tlp.View(r.b) }

func seqLT(a, b uint32) bool { return int32(a-b) < 0 }

// advert is what the kit announces in a session.
type advert struct {
	credits [encap.NumCreditTypes]uint32
	inf     uint8
	window  uint16
	tagBits uint8
}

func defaultAdvert() advert {
	a := advert{window: 64, tagBits: 8}
	for t := range a.credits {
		a.credits[t] = 256
	}
	return a
}

func newEnd(led *ledger, role encap.Role, pair uint32, exact bool, timers Timers, seed uint64) *end {
	e := &end{led: led, role: role, pair: pair, exact: exact, timers: timers, maxTLP: 4096 + 20,
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), sessions: map[uint32]string{}, kitSessions: map[uint32]string{},
		kitID: tlp.NewID(0x7e, 0, 0), kaSent: map[uint8]bool{0: true}}
	if role == encap.RoleGPU {
		e.kitID = tlp.NewID(0x7f, 0, 0)
	}
	e.newSession(0, defaultAdvert())
	e.expectRenew = false
	return e
}

// newSession starts a kit session with a fresh nonce and ISN.
func (e *end) newSession(now time.Duration, a advert) {
	old := e.session
	for e.session == 0 || e.session == old || e.session == e.iut.Session || e.kitSessions[e.session] != "" {
		e.session = e.rng.Uint32()
	}
	e.kitSessions[e.session] = e.scenario()
	e.isn = e.rng.Uint32()
	e.sndNxt, e.sndUna = e.isn, e.isn
	e.kitConsumed = [encap.NumCreditTypes]uint32{}
	e.replay, e.sentAt = map[uint32][]byte{}, map[uint32]time.Duration{}
	e.adv, e.advInf, e.window, e.tagBits = a.credits, a.inf, a.window, a.tagBits
	e.up, e.echoDue, e.helloDue = false, false, now
	e.ackDue, e.nakDue, e.kaAckDue = false, false, false
	e.reqs, e.cpls = map[uint16]kitReq{}, nil
	e.deaf, e.silent, e.waitProbe, e.quiet, e.dropTLPs, e.noRetx = false, false, false, false, 0, false
	e.keepHole = false
	e.expectRenew = true
	e.iutUp = false
	if e.keys != nil {
		e.keys.newKitNonce(e)
	}
	e.resetRx()
}

// resetRx forgets what the kit received in the IUT's previous session.
func (e *end) resetRx() {
	e.held, e.tags, e.inbox = map[uint32][]byte{}, map[uint16]iutReq{}, nil
	e.dropped, e.deliveredAt = map[uint32][]byte{}, map[uint32]time.Duration{}
	e.consumed = [encap.NumCreditTypes]uint32{}
	e.ackSeen, e.limSeen, e.acks, e.naks, e.nakLog, e.kitNakAt = false, false, 0, nil, nil, 0
	e.kaAcks = map[uint8]time.Duration{}
	e.kaTimes = nil
	e.rcvNext = e.iut.ISN
}

// frameKind names a frame for messages: its message or control type.
func frameKind(b []byte) string {
	if len(b) < encap.HeaderLen {
		return "short frame"
	}
	h := encap.Header(b)
	if h.Type() == encap.MsgControl && len(b) > encap.HeaderLen {
		return encap.ControlType(b[encap.HeaderLen]).String()
	}
	return h.Type().String()
}

// elapsed is the time from from to to that the kit was not stalled.
func (e *end) elapsed(from, to time.Duration) time.Duration {
	d := to - from
	if e.stalled != nil {
		d -= e.stalled(from, to)
	}
	return d
}

// input takes a frame as it came from the IUT: a keyed kit opens it
// first, and a frame that does not open takes no effect.
func (e *end) input(now time.Duration, b []byte) {
	e.arrived++
	if e.keys != nil {
		p, ok := e.keys.open(e, now, b)
		if !ok {
			e.unopened++
			e.unopenedWhy = e.keys.why
			return
		}
		b = p
	}
	e.observe(now, b)
}

// unopenedNote names the frames in an LNK-1 gap that the kit could not
// open, or is empty.
func (e *end) unopenedNote() string {
	if e.unopened == 0 {
		return ""
	}
	frames := "frames"
	if e.unopened == 1 {
		frames = "frame"
	}
	return fmt.Sprintf("; %d %s came in the gap that the kit did not open (the latest: %s)", e.unopened, frames, e.unopenedWhy)
}

// observe checks one plain frame from the IUT (from the dxpu header on)
// and applies it.
func (e *end) observe(now time.Duration, b []byte) {
	kind := frameKind(b)
	if gap := e.elapsed(e.lastFrame, now); e.iutUp && e.lastFrame > 0 && gap > e.timers.Keepalive+e.timers.Slack {
		e.led.fail("LNK-1", "silent for %v while up, between a %s and a %s (Keepalive %v, slack %v)%s", gap.Round(time.Microsecond), e.lastKind, kind, e.timers.Keepalive, e.timers.Slack, e.unopenedNote())
	} else if e.iutUp && e.lastFrame > 0 {
		e.led.pass("LNK-1", "no silence longer than Keepalive %v (+%v slack) while up", e.timers.Keepalive, e.timers.Slack)
	}
	e.lastFrame, e.lastKind = now, kind
	e.unopened, e.unopenedWhy = 0, ""
	e.frames++
	h, body, ok := e.checkFrame(b)
	if !ok {
		e.badFrames++
		return
	}
	e.checkMTU(b)
	t := h.Type()
	e.checkSeq(h, body)
	if t == encap.MsgControl {
		e.onControl(now, h, body)
		return
	}
	if e.deaf || !e.iutKnown {
		return
	}
	last := h.Seq() + uint32(h.Count()) - 1 // of a TLP frame
	if t == encap.MsgTLP && e.keepHole && e.dropTLPs == 0 {
		if !seqLT(e.hole, last) {
			// Only the hole (or before it) again: lost as well.
			e.forEachTLP(h, body, func(seq uint32, t []byte) { e.dropped[seq] = append([]byte(nil), t...) })
			return
		}
		e.keepHole = false // a TLP behind the hole: the hole shows
	}
	if t == encap.MsgTLP && e.dropTLPs > 0 && !seqLT(last, e.rcvNext) {
		// Lost on purpose: nothing of it takes effect; keep the TLPs to
		// compare with their retransmission (SEQ-2). Only a frame with a
		// TLP the kit has not had: losing a late resend of one it has
		// would lose nothing.
		e.dropTLPs--
		e.forEachTLP(h, body, func(seq uint32, t []byte) { e.dropped[seq] = append([]byte(nil), t...) })
		if e.keepHole {
			e.hole = h.Seq()
			if seqLT(e.hole, e.rcvNext) {
				e.hole = e.rcvNext
			}
		}
		return
	}
	e.headerFields(now, h)
	if t == encap.MsgNak && h.Flags()&encap.FlagAck != 0 {
		e.naks = append(e.naks, h.Ack())
		e.nakLog = append(e.nakLog, h.Ack())
	}
	if t == encap.MsgTLP {
		e.onTLPs(now, h, body)
	}
}

// checkFrame applies the format rules; ok false means the frame is
// dropped.
func (e *end) checkFrame(b []byte) (encap.Header, []byte, bool) {
	if len(b) < encap.HeaderLen {
		e.led.fail("FRM-2", "frame of %d bytes, shorter than the %d-byte header", len(b), encap.HeaderLen)
		return nil, nil, false
	}
	h := encap.Header(b)
	if h.Version() != encap.Version {
		e.led.fail("FRM-4", "byte 0: version %d, want 1", h.Version())
		return nil, nil, false
	}
	e.led.pass("FRM-4", "every frame has version 1")
	if t := h.Type(); t < encap.MsgTLP || t > encap.MsgControl {
		e.led.fail("FRM-5", "byte 1: message type %d", t)
		return nil, nil, false
	}
	e.led.pass("FRM-5", "every message type in 1..5")
	if h.PairID() != e.pair {
		e.led.fail("FRM-6", "bytes 2-4: pair %#x, the pair is %#x", h.PairID(), e.pair)
		return nil, nil, false
	}
	e.led.pass("FRM-6", "every frame carries pair %#x", e.pair)
	if e.keys != nil {
		// Opened: KEY-2 judged the sealing.
	} else if b[0]&0x08 != 0 {
		e.led.fail("KEY-1", "byte 0: sealed bit 3 set on a pair without keys")
	} else {
		e.led.pass("KEY-1", "sealed bit clear")
	}
	if b[27] != 0 || b[26]&0xc0 != 0 {
		e.led.fail("FRM-7", "reserved bits set: byte 26 %#02x (bits 7:6), byte 27 %#02x", b[26], b[27])
	} else {
		e.led.pass("FRM-7", "reserved bytes 0")
	}
	bl := h.BodyLen()
	if encap.HeaderLen+bl > len(b) {
		e.led.fail("FRM-2", "bytes 6-7: body length %d, %d bytes follow the header", bl, len(b)-encap.HeaderLen)
		return nil, nil, false
	}
	if e.exact && encap.HeaderLen+bl != len(b) {
		e.led.fail("FRM-2", "datagram of %d bytes, header and body are %d", len(b), encap.HeaderLen+bl)
	} else if e.exact {
		e.led.pass("FRM-2", "datagram length = 40 + body length")
	}
	body := b[encap.HeaderLen : encap.HeaderLen+bl]
	n := h.Count()
	if h.Type() != encap.MsgTLP {
		if n != 0 {
			e.led.fail("FRM-8", "byte 5: %d TLPs in a %v frame", n, h.Type())
			return nil, nil, false
		}
		e.led.pass("FRM-8", "counts and length tables agree with the bodies")
		return h, body, true
	}
	if n == 0 || 2*n > bl {
		e.led.fail("FRM-8", "TLP frame with N = %d and a %d-byte body", n, bl)
		return nil, nil, false
	}
	off := 2 * n
	for i := 0; i < n; i++ {
		l := int(binary.BigEndian.Uint16(body[2*i:]))
		if l < 12 || l%4 != 0 || l > int(e.maxTLP) {
			e.led.fail("FRM-9", "TLP %d (seq %#x): length %d, want a multiple of 4 in 12..%d", i, h.Seq()+uint32(i), l, e.maxTLP)
			return nil, nil, false
		}
		if off+l > bl {
			e.led.fail("FRM-8", "TLP %d (seq %#x) of %d bytes at body offset %d overruns the %d-byte body", i, h.Seq()+uint32(i), l, off, bl)
			return nil, nil, false
		}
		if _, err := tlp.Parse(body[off : off+l]); err != nil {
			e.led.fail("FRM-9", "TLP %d (seq %#x): %v", i, h.Seq()+uint32(i), err)
			return nil, nil, false
		}
		off += l
	}
	if off != bl {
		e.led.fail("FRM-8", "%d bytes after the last TLP in the body", bl-off)
		return nil, nil, false
	}
	e.led.pass("FRM-8", "counts and length tables agree with the bodies")
	e.led.pass("FRM-9", "every TLP well formed")
	return h, body, true
}

func (e *end) forEachTLP(h encap.Header, body []byte, f func(seq uint32, t []byte)) {
	n := h.Count()
	off := 2 * n
	for i := 0; i < n; i++ {
		l := int(binary.BigEndian.Uint16(body[2*i:]))
		f(h.Seq()+uint32(i), body[off:off+l])
		off += l
	}
}

func (e *end) onControl(now time.Duration, h encap.Header, body []byte) {
	c, err := encap.ParseControl(body)
	if err != nil {
		if helloFieldsBad(body) {
			e.led.fail("CTL-2", "%v", err)
		} else {
			e.led.fail("CTL-1", "%v", err)
		}
		return
	}
	if c.Role == e.role {
		e.led.fail("CTL-1", "byte 2: the IUT claims role %v, the kit's own", c.Role)
		return
	}
	e.led.pass("CTL-1", "control messages well formed")
	switch c.Type {
	case encap.CtlHello, encap.CtlHelloAck:
		e.led.pass("CTL-2", "HELLO fields in range")
		if e.keys != nil && !e.keys.helloBody(e, &c, body) {
			return
		}
		e.onHello(now, &c)
		return
	case encap.CtlReset:
		e.resets = append(e.resets, c)
		e.checkReset(&c)
		return
	}
	if e.deaf || !e.iutKnown || c.Session != e.iut.Session {
		return
	}
	e.headerFields(now, h)
	switch c.Type {
	case encap.CtlKeepalive:
		e.keepalives++
		e.kaTimes = append(e.kaTimes, now)
		e.kaAckDue, e.kaAckProbe = true, c.Probe
		e.waitProbe = false
	case encap.CtlKeepaliveAck:
		e.kaAcks[c.Probe] = now
		if !e.kaSent[c.Probe] {
			e.kaStrays++
			e.led.fail("CTL-3", "a KEEPALIVE-ACK with probe number %d, which the kit never sent", c.Probe)
		}
	}
}

// helloFieldsBad reports whether a control message that does not parse is
// a HELLO or HELLO-ACK whose common fields are right (CTL-1): what is
// wrong is in its HELLO fields (CTL-2).
func helloFieldsBad(body []byte) bool {
	if len(body) < encap.HelloLen {
		return false // shorter than its type's length: CTL-1
	}
	if t := encap.ControlType(body[0]); t != encap.CtlHello && t != encap.CtlHelloAck {
		return false
	}
	common := append([]byte(nil), body[:encap.ControlLen]...)
	common[0] = byte(encap.CtlKeepalive)
	_, err := encap.ParseControl(common)
	return err == nil
}

func (e *end) onHello(now time.Duration, c *encap.Control) {
	if c.PeerSession != 0 && c.PeerSession != e.session && e.kitSessions[c.PeerSession] != "" {
		// A late HELLO(-ACK) of a session the kit has ended (it echoes an
		// earlier kit session): stale, not a new start of the IUT.
		return
	}
	if c.Type == encap.CtlHello {
		e.hellos++
		e.helloTo = c.PeerSession
	} else {
		e.helloAck = true
	}
	if e.deaf {
		if !e.iutKnown || c.Session != e.iut.Session {
			e.restarts++
			e.restartAt = now
			e.judgeNonce(c)
			e.newIUTSession(c)
		}
		return
	}
	if !e.iutKnown || c.Session != e.iut.Session {
		e.judgeNonce(c)
		if !e.expectRenew && e.iutKnown {
			e.restarts++
		}
		e.expectRenew = false
		e.newIUTSession(c)
	}
	if c.Type == encap.CtlHello {
		e.echoDue = true
	}
	if c.PeerSession == e.session && !e.up {
		e.up = true
		e.echoDue = true
		if c.Type == encap.CtlHelloAck {
			e.led.pass("HSK-2", "HELLO answered with a HELLO-ACK echoing the kit's session")
		}
	}
}

// judgeNonce judges HSK-4 on the HELLO(-ACK) of a session the kit does
// not know (yet, or again). The IUT's current session seen again with its
// ISN is not a new start: whether it should have been is LNK-7's to judge.
func (e *end) judgeNonce(c *encap.Control) {
	switch {
	case e.sessions[c.Session] != "" && (c.Session != e.iut.Session || c.ISN != e.iut.ISN):
		e.led.fail("HSK-4", "the IUT reused its session nonce %#x (first seen in scenario %s) on a new start", c.Session, e.sessions[c.Session])
	case e.kitSessions[c.Session] != "":
		e.led.fail("HSK-4", "the IUT's session %#x equals one of the kit's (of scenario %s)", c.Session, e.kitSessions[c.Session])
	case e.sessions[c.Session] == "":
		e.led.pass("HSK-4", "a new non-zero session nonce on every start")
	}
}

// scenario names the scenario running, "start" before the first.
func (e *end) scenario() string {
	if e.led.scenario == "" {
		return "start"
	}
	return e.led.scenario
}

// newIUTSession takes c as the IUT's HELLO or HELLO-ACK of a session the kit
// did not know.
func (e *end) newIUTSession(c *encap.Control) {
	e.prevIUT = e.iut.Session
	e.iut, e.iutKnown = *c, true
	e.iutUp = false
	e.iutNext = c.ISN
	if e.sessions[c.Session] == "" {
		e.sessions[c.Session] = e.scenario()
	}
	e.resetRx()
}

// headerFields checks and applies the Ack, SACK and credit fields of a
// frame of the IUT's current session.
func (e *end) headerFields(now time.Duration, h encap.Header) {
	if h.Flags()&(encap.FlagAck|encap.FlagCredit) != encap.FlagAck|encap.FlagCredit {
		e.led.fail("ACK-3", "a %v frame once up without valid Ack and credits (flags %#x)", h.Type(), h.Flags())
		return
	}
	e.led.pass("ACK-3", "every frame once up carries Ack and credits")
	if !e.iutUp {
		e.iutUp = true
		e.led.pass("HSK-3", "up once the kit echoed its session")
	}
	ack := h.Ack()
	bound := e.ackBound()
	switch {
	case seqLT(bound, ack):
		e.led.fail("ACK-1", "Ack %#x covers TLPs the kit never sent (it sent up to %#x)", ack, bound)
	case e.ackSeen && seqLT(ack, e.lastAck):
		e.led.fail("ACK-2", "Ack went back from %#x to %#x", e.lastAck, ack)
	default:
		e.led.pass("ACK-2", "Ack never moved backwards")
		e.lastAck, e.ackSeen = ack, true
		e.acks++
		for ; seqLT(e.sndUna, ack); e.sndUna++ {
			delete(e.replay, e.sndUna)
			delete(e.sentAt, e.sndUna)
		}
	}
	if h.Flags()&encap.FlagSack != 0 {
		sack := h.Sack()
		e.sackAck, e.sackBits = ack, sack
		for i := 0; i < 32; i++ {
			s := ack + 1 + uint32(i)
			if sack&(1<<i) == 0 {
				continue
			}
			if at, ok := e.sentAt[s]; (!ok || at == 0) && !seqLT(s, e.sndUna) {
				e.led.fail("ACK-4", "SACK bit %d claims TLP %#x, which the kit never sent", i, s)
				break
			}
		}
		e.led.pass("ACK-4", "SACK bits only for TLPs the kit sent")
	}
	e.credits(h)
}

// ackBound is the first sequence number the kit has not sent: the IUT
// cannot have accepted it.
func (e *end) ackBound() uint32 {
	for s := e.sndUna; s != e.sndNxt; s++ {
		if e.sentAt[s] == 0 {
			return s
		}
	}
	return e.sndNxt
}

func (e *end) credits(h encap.Header) {
	if !e.limSeen {
		e.checkInitialLimits(h)
	}
	if h.InfiniteMask()&0x3f != e.iut.Infinite {
		e.led.fail("CRD-3", "infinite mask %#x, the HELLO said %#x", h.InfiniteMask()&0x3f, e.iut.Infinite)
	} else {
		e.led.pass("CRD-3", "infinite mask as announced")
	}
	for t := encap.CreditType(0); t < encap.NumCreditTypes; t++ {
		if e.iut.Infinite&(1<<t) != 0 {
			continue
		}
		l := h.CreditLimit(t)
		hdr := t == encap.CreditPH || t == encap.CreditNPH || t == encap.CreditCplH
		back := e.limSeen && (hdr && int16(uint16(l)-uint16(e.lim[t])) < 0 || !hdr && int32(l-e.lim[t]) < 0)
		ahead := l - e.consumedByKit(t)
		if hdr {
			ahead &= 0xffff
		}
		switch {
		case back:
			e.led.fail("CRD-4", "credit type %d: limit went back from %d to %d", t, e.lim[t], l)
		case ahead > e.iut.Credits[t]:
			e.led.fail("CRD-4", "credit type %d: limit %d is %d ahead of what the kit consumed, the buffers hold %d", t, l, ahead, e.iut.Credits[t])
		default:
			e.led.pass("CRD-4", "limits only moved forward, within the buffers")
			e.lim[t] = l
		}
	}
	e.limSeen = true
}

// consumedByKit is the IUT's credit of type t the kit's TLPs of this
// session took.
func (e *end) consumedByKit(t encap.CreditType) uint32 { return e.kitConsumed[t] }

func (e *end) onTLPs(now time.Duration, h encap.Header, body []byte) {
	e.ackDue = true
	e.forEachTLP(h, body, func(seq uint32, t []byte) {
		if d, ok := e.dropped[seq]; ok {
			if string(d) != string(t) {
				e.led.fail("SEQ-2", "TLP %#x retransmitted with other bytes: % x, first sent % x", seq, t, d)
			} else {
				e.led.pass("SEQ-2", "retransmissions identical to the first transmission")
			}
			delete(e.dropped, seq)
		}
		if seqLT(seq, e.rcvNext) {
			// A duplicate, acknowledged again below; before anything of
			// the session was delivered, a TLP numbered before the ISN
			// (within a window of it: a stale frame of an older session
			// is as likely anywhere else).
			if e.rcvNext == e.iut.ISN && e.iut.ISN-seq <= uint32(e.window) {
				e.led.fail("SEQ-1", "TLP %#x precedes the ISN %#x of the IUT's HELLO", seq, e.iut.ISN)
			}
			return
		}
		if seq-e.rcvNext >= uint32(e.window) {
			e.led.fail("RTX-1", "TLP %#x is %d beyond the next expected %#x, the kit's window is %d", seq, seq-e.rcvNext, e.rcvNext, e.window)
			return
		}
		e.led.pass("RTX-1", "TLPs within the kit's window of %d", e.window)
		if old, ok := e.held[seq]; ok {
			if string(old) != string(t) {
				e.led.fail("SEQ-2", "TLP %#x arrived twice with different bytes", seq)
			}
			return
		}
		e.held[seq] = append([]byte(nil), t...)
	})
	for {
		t, ok := e.held[e.rcvNext]
		if !ok {
			break
		}
		delete(e.held, e.rcvNext)
		e.deliver(now, e.rcvNext, t)
		e.rcvNext++
	}
	if len(e.held) > 0 && (!e.nakDue || e.nakFor != e.rcvNext) {
		e.nakDue, e.nakFor = true, e.rcvNext
	}
}

// deliver takes the IUT's TLP seq in sequence order: credits and tags are
// accounted here.
func (e *end) deliver(now time.Duration, seq uint32, b []byte) {
	if seq == e.iut.ISN {
		e.led.pass("SEQ-1", "the first TLP carries the ISN of the HELLO")
	}
	e.deliveredAt[seq] = now
	e.delivLast = now
	v := tlp.View(b)
	c, hdr, data := v.Credits()
	for _, x := range []struct {
		t    encap.CreditType
		need uint32
	}{{encap.CreditType(2 * c), uint32(hdr)}, {encap.CreditType(2*c + 1), uint32(data)}} {
		if x.need == 0 || e.advInf&(1<<x.t) != 0 {
			continue
		}
		e.consumed[x.t] += x.need
		var over bool
		if x.t%2 == 0 {
			over = int16(uint16(e.adv[x.t])-uint16(e.consumed[x.t])) < 0
		} else {
			over = int32(e.adv[x.t]-e.consumed[x.t]) < 0
		}
		if over {
			e.led.fail("CRD-2", "TLP %#x (%v) brings credit type %d to %d consumed, the kit's limit is %d", seq, v.Kind(), x.t, e.consumed[x.t], e.adv[x.t])
		} else {
			e.led.pass("CRD-2", "never beyond the kit's limits")
		}
	}
	k := v.Kind()
	switch {
	case k.IsCompletion():
		e.cpls = append(e.cpls, rxTLP{seq: seq, at: now, b: b})
		if r, ok := e.reqs[v.Tag()]; ok && v.RequesterID() == e.kitID {
			e.led.pass("TAG-3", "completions carry the tag and requester ID of the kit's request")
			if v.Status() != tlp.StatusSC || !v.HasData() || v.PayloadLen()-int(v.LowerAddress()&3) >= v.ByteCount() {
				delete(e.reqs, v.Tag())
			}
			_ = r
		} else {
			e.led.fail("TAG-3", "completion %#x with tag %d, requester %v matches no request of the kit (requester %v)", seq, v.Tag(), v.RequesterID(), e.kitID)
		}
		return
	case k.IsNonPosted():
		w := v.Tag()
		base, n := 0, 256
		if e.tagBits == 10 {
			base, n = 256, 768
		}
		if int(w) < base || int(w) >= base+n {
			e.led.fail("TAG-2", "request %#x has wire tag %d, outside the kit's %d-bit tag space %d..%d", seq, w, e.tagBits, base, base+n-1)
		} else {
			e.led.pass("TAG-2", "wire tags within the kit's %d-bit tag space", e.tagBits)
		}
		if prev, ok := e.tags[w]; ok && now-prev.at < 2*e.timers.CompletionTimeout-e.timers.Slack {
			e.led.fail("TAG-1", "request %#x reuses wire tag %d of request %#x, outstanding since %v", seq, w, prev.seq, (now - prev.at).Round(time.Microsecond))
		} else {
			e.led.pass("TAG-1", "wire tags unique among outstanding requests")
		}
		e.tags[w] = iutReq{seq: seq, at: now, req: b}
	}
	e.inbox = append(e.inbox, rxTLP{seq: seq, at: now, b: b})
}

// header builds a fixed header of the kit's session.
func (e *end) header(t encap.MsgType, n, bodyLen int, seq uint32) []byte {
	b := make([]byte, encap.HeaderLen, encap.HeaderLen+bodyLen)
	h := encap.Header(b)
	var flags uint8
	if e.up {
		flags = encap.FlagAck | encap.FlagCredit
		h.SetAck(e.rcvNext)
		var sack uint32
		for i := 0; i < 32; i++ {
			if _, ok := e.held[e.rcvNext+1+uint32(i)]; ok {
				sack |= 1 << i
			}
		}
		if sack != 0 {
			flags |= encap.FlagSack
			h.SetSack(sack)
		}
		for ct := encap.CreditType(0); ct < encap.NumCreditTypes; ct++ {
			h.SetCreditLimit(ct, e.adv[ct], e.advInf&(1<<ct) != 0)
		}
		e.ackDue, e.nakDue = false, false
	}
	h.SetVersionFlags(encap.Version, flags)
	h.SetType(t)
	h.SetPairID(e.pair)
	h.SetCount(n)
	h.SetBodyLen(bodyLen)
	h.SetSeq(seq)
	return b
}

func (e *end) control(c encap.Control) []byte {
	c.Role, c.Session = e.role, e.session
	b := e.header(encap.MsgControl, 0, c.Len(), e.sndNxt)
	return c.AppendTo(b)
}

func (e *end) hello(t encap.ControlType) []byte {
	c := encap.Control{Type: t, TagBits: e.tagBits, PeerSession: e.iut.Session, Window: e.window, MaxTLP: e.maxTLP,
		ISN: e.isn, Infinite: e.advInf}
	if !e.iutKnown {
		c.PeerSession = 0
	}
	for ct := range c.Credits {
		c.Credits[ct] = e.adv[ct]
	}
	if e.keys != nil {
		return e.keys.appendNonce(e.control(c))
	}
	return e.control(c)
}

func (e *end) bare(t encap.MsgType) []byte { return e.header(t, 0, 0, e.sndNxt) }

// queue numbers a TLP without sending it; send it with tlpFrame.
func (e *end) queue(t []byte) uint32 {
	s := e.sndNxt
	e.sndNxt++
	e.replay[s] = t
	e.sentAt[s] = 0
	v := tlp.View(t)
	c, hdr, data := v.Credits()
	e.kitConsumed[2*c] += uint32(hdr)
	e.kitConsumed[2*c+1] += uint32(data)
	if k := v.Kind(); k.IsNonPosted() {
		e.reqs[v.Tag()] = kitReq{seq: s, kind: k}
	}
	return s
}

// tlpFrame builds a frame of the queued TLPs first..first+n-1 and marks
// them sent at now.
func (e *end) tlpFrame(now time.Duration, first uint32, n int) ([]byte, error) {
	tlps := make([][]byte, n)
	size := 0
	for i := range tlps {
		t, ok := e.replay[first+uint32(i)]
		if !ok {
			return nil, fmt.Errorf("conform: TLP %#x is not queued", first+uint32(i))
		}
		tlps[i] = t
		size += 2 + len(t)
	}
	b := e.header(encap.MsgTLP, n, size, first)
	for _, t := range tlps {
		b = binary.BigEndian.AppendUint16(b, uint16(len(t)))
	}
	for i, t := range tlps {
		b = append(b, t...)
		e.sentAt[first+uint32(i)] = max(now, 1)
	}
	return b, nil
}

// due returns the frames the kit owes at now: handshake, answers,
// retransmissions, acknowledgements and keepalives.
func (e *end) due(now time.Duration) [][]byte {
	if e.silent {
		return nil
	}
	if e.waitProbe {
		return nil
	}
	if e.quiet && e.up && e.iutUp {
		if !e.kaAckDue {
			return nil
		}
		e.kaAckDue = false
		return [][]byte{e.control(encap.Control{Type: encap.CtlKeepaliveAck, PeerSession: e.iut.Session, Probe: e.kaAckProbe})}
	}
	var out [][]byte
	if !e.up || !e.iutUp {
		if e.echoDue && e.iutKnown {
			e.echoDue = false
			out = append(out, e.hello(encap.CtlHelloAck))
		}
		if !e.up && now >= e.helloDue {
			e.helloDue = now + e.timers.HelloInterval
			out = append(out, e.hello(encap.CtlHello))
		}
		if !e.up {
			return out
		}
	}
	// Any frame below carries the Ack and SACK and clears nakDue; a NAK
	// still goes out: a KEEPALIVE-ACK due at the same moment used to
	// swallow the kit's NAK, and NAK-2 had no NAK to judge.
	nak := e.nakDue
	if e.echoDue {
		e.echoDue = false
		out = append(out, e.hello(encap.CtlHelloAck))
	}
	if e.kaAckDue {
		e.kaAckDue = false
		out = append(out, e.control(encap.Control{Type: encap.CtlKeepaliveAck, PeerSession: e.iut.Session, Probe: e.kaAckProbe}))
	}
	if !e.noRetx {
		for s := e.sndUna; s != e.sndNxt; s++ {
			if at := e.sentAt[s]; at != 0 && now-at >= e.kitRTO() {
				if f, err := e.tlpFrame(now, s, 1); err == nil {
					out = append(out, f)
					e.resent++
				}
			}
		}
		for _, a := range e.naks {
			if at := e.sentAt[a]; at != 0 && now-at >= e.timers.Slack/4 {
				if f, err := e.tlpFrame(now, a, 1); err == nil {
					out = append(out, f)
					e.resent++
				}
			}
		}
		e.naks = e.naks[:0]
	}
	if nak || e.nakDue {
		e.kitNakAt = max(now, 1)
		out = append(out, e.bare(encap.MsgNak))
	} else if e.ackDue {
		out = append(out, e.bare(encap.MsgAck))
	}
	if len(out) == 0 && now-e.lastSent >= e.timers.Keepalive {
		out = append(out, e.control(encap.Control{Type: encap.CtlKeepalive, PeerSession: e.iut.Session}))
	}
	return out
}

// nextDue is the next time due may return something without new input.
func (e *end) nextDue(now time.Duration) time.Duration {
	if e.silent || e.waitProbe || e.quiet && e.up && e.iutUp && !e.kaAckDue {
		return now + e.timers.Keepalive
	}
	if e.echoDue || e.kaAckDue || e.ackDue || e.nakDue {
		return now
	}
	if !e.up {
		return e.helloDue
	}
	d := e.lastSent + e.timers.Keepalive
	if !e.noRetx {
		for s := e.sndUna; s != e.sndNxt; s++ {
			if at := e.sentAt[s]; at != 0 {
				d = min(d, at+e.kitRTO())
			}
		}
	}
	return max(d, now)
}

// kitRTO is how long the kit waits before resending a TLP itself: long
// enough that the IUT's acknowledgement rules are what gets judged.
func (e *end) kitRTO() time.Duration { return 4 * e.timers.Slack }
