package conform

import (
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
)

// The rules the kit judges from the monitor fail on a frame that breaks
// them (the sans-I/O end, fed directly).
func TestMonitorRulesFail(t *testing.T) {
	t.Parallel()
	hello := func(e *end, isn uint32, seq uint32) {
		c := encap.Control{Type: encap.CtlHello, Role: encap.RoleGPU, TagBits: 8, Session: 9, Window: 64, MaxTLP: 4116, ISN: isn}
		for i := range c.Credits {
			c.Credits[i] = 64
		}
		f := e.header(encap.MsgControl, 0, encap.HelloLen, seq)
		encap.Header(f).SetVersionFlags(encap.Version, 0)
		e.observe(time.Millisecond, c.AppendTo(f))
	}
	newE := func() (*ledger, *end) {
		led := newLedger()
		return led, newEnd(led, encap.RoleHost, 42, true, Timers{}.withDefaults(), 1)
	}
	flagged := func(e *end, t encap.MsgType, body []byte) []byte {
		f := make([]byte, encap.HeaderLen, encap.HeaderLen+len(body))
		h := encap.Header(f)
		h.SetVersionFlags(encap.Version, encap.FlagAck|encap.FlagCredit)
		h.SetType(t)
		h.SetPairID(42)
		h.SetBodyLen(len(body))
		h.SetSeq(100)
		h.SetAck(e.sndNxt)
		for ct := encap.CreditType(0); ct < encap.NumCreditTypes; ct++ {
			h.SetCreditLimit(ct, 64, false)
		}
		return append(f, body...)
	}
	cases := map[string]func(e *end){
		// A HELLO whose Seq is not its ISN.
		"FRM-11": func(e *end) { hello(e, 100, 5) },
		// A frame longer than the MTU.
		"FRM-3": func(e *end) {
			hello(e, 100, 100)
			e.observe(2*time.Millisecond, flagged(e, encap.MsgCredit, make([]byte, 1500)))
		},
		// The first limits of a session below the HELLO's credits.
		"CRD-1": func(e *end) {
			hello(e, 100, 100)
			f := flagged(e, encap.MsgAck, nil)
			encap.Header(f).SetCreditLimit(encap.CreditPH, 50, false)
			e.observe(2*time.Millisecond, f)
		},
		// A RESET of an unknown reason.
		"CTL-4": func(e *end) {
			hello(e, 100, 100)
			r := encap.Control{Type: encap.CtlReset, Role: encap.RoleGPU, Reason: 9, Session: 9}
			f := e.header(encap.MsgControl, 0, encap.ControlLen, 100)
			encap.Header(f).SetVersionFlags(encap.Version, 0)
			e.observe(2*time.Millisecond, r.AppendTo(f))
		},
	}
	for id, feed := range cases {
		led, e := newE()
		feed(e)
		if !led.failed(id) {
			t.Errorf("%s: %s (%s), want a failure", id, led.get(id).Verdict, led.get(id).Reason)
		}
	}
	led := newLedger()
	led.judgeTimers(10*time.Millisecond, 5*time.Millisecond)
	if !led.failed("TMR-1") {
		t.Errorf("TMR-1: Keepalive above DeadAfter judged %s", led.get("TMR-1").Verdict)
	}
}

// ctlBody returns a control frame's header and body, to rewrite in place.
func ctlBody(b []byte) (encap.Header, []byte, bool) {
	h, _, err := encap.ParseHeader(b)
	if err != nil || h.Type() != encap.MsgControl || len(h.Body()) < encap.ControlLen {
		return nil, nil, false
	}
	return h, h.Body(), true
}

// Broken bridges, each a wrapper around dxpu's: the kit fails exactly the
// rule each breaks (other rules may fail along, as the breakage spreads).
func TestBrokenBridgesFailNewRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rule      string
		scenarios []string
		su        setup
	}{
		// Takes 0 completion credits from the kit's HELLO instead of 1.
		{"HSK-5", []string{"handshake", "credit-frames"}, setup{controlled: true, wrap: func(tr driver.Transport) driver.Transport {
			return &wrapped{Transport: tr, recv: func(w *wrapped, b []byte) bool {
				if _, body, ok := ctlBody(b); ok && len(body) >= encap.HelloLen && (body[0] == byte(encap.CtlHello) || body[0] == byte(encap.CtlHelloAck)) && body[25] == 1 {
					body[25] = 0
				}
				return true
			}}
		}}},
		// Honours the infinite mask of frame headers: a header claiming
		// CplH infinite raises its CplH limit.
		{"CRD-8", []string{"handshake", "credit-frames"}, setup{controlled: true, wrap: func(tr driver.Transport) driver.Transport {
			return &wrapped{Transport: tr, recv: func(w *wrapped, b []byte) bool {
				h, _, err := encap.ParseHeader(b)
				if err == nil && h.Flags()&encap.FlagCredit != 0 && h.InfiniteMask()&(1<<encap.CreditCplH) != 0 {
					h.SetCreditLimit(encap.CreditCplH, h.CreditLimit(encap.CreditCplH)+1, false)
				}
				return true
			}}
		}}},
		// Drops ACK, NAK and CREDIT frames with a body.
		{"FRM-12", []string{"handshake", "credit-frames"}, setup{controlled: true, wrap: func(tr driver.Transport) driver.Transport {
			return &wrapped{Transport: tr, recv: func(w *wrapped, b []byte) bool {
				h, _, err := encap.ParseHeader(b)
				return err != nil || h.Type() == encap.MsgTLP || h.Type() == encap.MsgControl || h.BodyLen() == 0
			}}
		}}},
		// Takes frames with the sealed bit on an unkeyed pair (clears it).
		{"KEY-1", []string{"handshake", "malformed"}, setup{controlled: true, wrap: func(tr driver.Transport) driver.Transport {
			return &wrapped{Transport: tr, recv: func(w *wrapped, b []byte) bool {
				if len(b) > 0 {
					b[0] &^= 0x08
				}
				return true
			}}
		}}},
		// Completes a handshake on an ACK frame whatever its Ack (the
		// wrapper turns the kit's stale Ack into the ISN).
		{"HSK-6", []string{"handshake", "handshake-edges"}, setup{controlled: true, wrap: func(tr driver.Transport) driver.Transport {
			var isn uint32
			return &wrapped{Transport: tr, send: func(w *wrapped, b []byte) {
				if _, body, ok := ctlBody(b); ok && len(body) >= encap.HelloLen && body[0] == byte(encap.CtlHelloAck) {
					isn = encap.Header(b).Seq()
				}
			}, recv: func(w *wrapped, b []byte) bool {
				if h, _, err := encap.ParseHeader(b); err == nil && h.Type() == encap.MsgAck && h.Ack()-isn == 0x10000 {
					h.SetAck(isn)
				}
				return true
			}}
		}}},
		// Its HELLOs after going down name the peer session it had.
		{"LNK-8", []string{"handshake", "reset"}, setup{controlled: true, wrap: func(tr driver.Transport) driver.Transport {
			var peer [4]byte
			return &wrapped{Transport: tr, send: func(w *wrapped, b []byte) {
				if _, body, ok := ctlBody(b); ok && body[0] == byte(encap.CtlHello) {
					if body[8]|body[9]|body[10]|body[11] != 0 {
						copy(peer[:], body[8:12])
					} else {
						copy(body[8:12], peer[:])
					}
				}
			}}
		}}},
		// Holds nothing out of order: a one-TLP reorder window.
		{"SEQ-4", []string{"handshake", "loss-to-iut"}, setup{controlled: true, bridgeWindow: 1}},
		// Its local side applies each write after the next.
		{"ORD-1", []string{"handshake", "completions"}, setup{controlled: true, stub: func(s *Stub) { s.swapWrites = true }}},
		// Its local side sends a split read's completions last first.
		{"ORD-5", []string{"handshake", "completions"}, setup{controlled: true, stub: func(s *Stub) { s.reverseSplit = true }}},
		// Its local side splits even an 8-byte read.
		{"TAG-6", []string{"handshake", "completions"}, setup{controlled: true, stub: func(s *Stub) { s.splitSmall = true }}},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			rep := runAgainst(t, tc.su, tc.scenarios...)
			expectFail(t, rep, tc.rule)
		})
	}
}

// Through the test target, against an implementation outside the kit's
// control: a bridge whose completion timeout is far longer than the kit
// was told never answers the unanswered read in time (TAG-4); one that
// matches completions to the wrong requests returns them to the target
// with the wrong tags (TAG-1).
func TestBrokenBridgesFailThroughTestTarget(t *testing.T) {
	t.Parallel()
	slow := iutTimers
	slow.CompletionTimeout = 5 * time.Second
	rep := runAgainst(t, setup{doorbell: true, bridge: &slow}, "handshake", "test-target")
	expectFail(t, rep, "TAG-4")

	rep = runAgainst(t, setup{doorbell: true, wrap: func(tr driver.Transport) driver.Transport {
		return &wrapped{Transport: tr, recv: func(w *wrapped, b []byte) bool {
			forEachTLP(b, func(v tlp.View) {
				if v.Kind().IsCompletion() {
					v.SetTag(v.Tag() ^ 0x20) // matched to another request
				}
			})
			return true
		}}
	}}, "handshake", "test-target")
	expectFail(t, rep, "TAG-1")
}
