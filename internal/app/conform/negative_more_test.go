package conform

import (
	"errors"
	"strings"
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
		t.Run(id, func(t *testing.T) {
			led, e := newE()
			feed(e)
			if !led.failed(id) {
				t.Errorf("%s: %s (%s), want a failure", id, led.get(id).Verdict, led.get(id).Reason)
			}
		})
	}
	t.Run("TMR-1", func(t *testing.T) {
		led := newLedger()
		led.judgeTimers(10*time.Millisecond, 5*time.Millisecond)
		if !led.failed("TMR-1") {
			t.Errorf("TMR-1: Keepalive above DeadAfter judged %s", led.get("TMR-1").Verdict)
		}
	})
}

// ctlBody returns a control frame's header and body, to rewrite in place.
func ctlBody(b []byte) (encap.Header, []byte, bool) {
	h, _, err := encap.ParseHeader(b)
	if err != nil || h.Type() != encap.MsgControl || len(h.Body()) < encap.ControlLen {
		return nil, nil, false
	}
	return h, h.Body(), true
}

// A bridge that takes frames with the sealed bit on an unkeyed pair (it
// clears the bit) fails KEY-1 on the receiving side too (the negatives
// row breaks the sending side).
func TestTakingSealedFramesFails(t *testing.T) {
	t.Parallel()
	rep := runAgainst(t, setup{controlled: true, wrap: func(tr driver.Transport) driver.Transport {
		return &wrapped{Transport: tr, recv: func(w *wrapped, b []byte) bool {
			if len(b) > 0 {
				b[0] &^= 0x08
			}
			return true
		}}
	}}, "handshake", "malformed")
	expectFail(t, rep, "KEY-1")
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

// TestWrongDoorbellIsTheKitsSetting: a --doorbell where the implementation
// has plain memory, no test target, takes no command. That is the kit's
// setting, an error (exit 2), not TAG-5 failed by the implementation.
func TestWrongDoorbellIsTheKitsSetting(t *testing.T) {
	t.Parallel()
	_, err := runKit(t, setup{doorbell: true, opts: func(o *Options) {
		db := uint64(0x40) // memory, 64-byte aligned, not the target
		o.Doorbell = &db
	}}, "handshake", "test-target")
	if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "no test target took command 1 at --doorbell 0x40") {
		t.Fatalf("kit: %v; want ErrMismatch naming the command no test target took", err)
	}
}
