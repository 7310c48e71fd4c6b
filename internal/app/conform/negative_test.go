package conform

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
)

// negCase is a rule's negative case: a broken implementation (dxpu's
// bridge behind a fault or with a broken configuration, or a broken local
// side) that the kit must fail on that rule. docs/conformance.md shows the
// table (TestNegativeCasesDocumented).
type negCase struct {
	rule string
	// broken says what the broken implementation does wrong.
	broken string
	// want is in the failure's reason: the kit fails the rule for this
	// breakage, not another.
	want string
	// drags are the other rules the breakage legitimately fails, and why.
	drags []string
	why   string
	// scenarios are the kit's scenarios the case runs (with handshake).
	scenarios []string
	// setup builds the broken implementation, fresh for each run.
	setup func() setup
	// test, instead of setup: the test function that is the negative
	// case, or its subtest (TestX/NAME, NAME a string literal in TestX).
	test string
	// none, instead of both: why the rule has no negative case (the
	// rules n/a on every run, fixedNA, and only those).
	none string
	// local: the rule needs the implementation to issue requests: through
	// its test target (--doorbell) or its local side under the kit's
	// control (Options.Stub); n/a against one outside the process without
	// a test target.
	local bool
}

// negatives has a row for every rule of the catalogue, in its order.
var negatives = []negCase{
	{rule: "FRM-1", broken: "takes the Ethernet frame's length, not the body length, as the frame's end (drops padded frames)", test: "TestPaddingRefusedFailsFRM1"},
	{rule: "FRM-2", broken: "pads every datagram with 4 bytes after the body", want: "datagram of",
		setup: outOnly(func(s *faultState, b []byte) [][]byte { return [][]byte{append(b, 0, 0, 0, 0)} })},
	{rule: "FRM-3", broken: "sends a CREDIT frame with a 1500-byte body, beyond the MTU", test: "TestMonitorRulesFail/FRM-3"},
	{rule: "FRM-4", broken: "sends a copy of every KEEPALIVE with version 2", want: "version 2",
		setup: outOnly(copyOf(isCtl(encap.CtlKeepalive), func(b []byte) { b[0] = 0x20 | b[0]&0x0f }))},
	{rule: "FRM-5", broken: "sends a copy of every KEEPALIVE with message type 9", want: "message type 9",
		setup: outOnly(copyOf(isCtl(encap.CtlKeepalive), func(b []byte) { b[1] = 9 }))},
	{rule: "FRM-6", broken: "executes frames of another pair (takes any pair ID as its own)", want: "was executed",
		drags: []string{"ACK-1", "CRD-4", "TAG-3"}, why: executedUnnumbered,
		scenarios: []string{"duplicates"},
		setup: inOnly(func(s *faultState, b []byte) []byte {
			if len(b) >= encap.HeaderLen {
				encap.Header(b).SetPairID(42)
			}
			return b
		})},
	{rule: "FRM-7", broken: "sets reserved byte 27 of every header", want: "byte 27",
		setup: outOnly(func(s *faultState, b []byte) [][]byte {
			if len(b) >= encap.HeaderLen {
				b[27] = 1
			}
			return [][]byte{b}
		})},
	{rule: "FRM-8", broken: "sends a copy of every KEEPALIVE with a TLP count of 3", want: "3 TLPs in a",
		setup: outOnly(copyOf(isCtl(encap.CtlKeepalive), func(b []byte) { b[5] = 3 }))},
	{rule: "FRM-9", broken: "sends a copy of every TLP frame with its first TLP length 10", want: "length 10",
		scenarios: []string{"exchange"},
		setup:     outOnly(copyOf(isType(encap.MsgTLP), func(b []byte) { binary.BigEndian.PutUint16(b[encap.HeaderLen:], 10) }))},
	{rule: "FRM-10", broken: "takes frames of any version as version 1", want: "version 2",
		drags: []string{"ACK-1", "CRD-4", "TAG-3"}, why: executedUnnumbered,
		scenarios: []string{"malformed"},
		setup: inOnly(func(s *faultState, b []byte) []byte {
			if len(b) > 0 {
				b[0] = 0x10 | b[0]&0x0f
			}
			return b
		})},
	{rule: "FRM-11", broken: "sends a HELLO whose Seq is not its ISN", test: "TestMonitorRulesFail/FRM-11"},
	{rule: "FRM-12", broken: "drops ACK, NAK and CREDIT frames with a body", want: "8-byte body",
		scenarios: []string{"credit-frames"},
		setup: func() setup {
			return setup{controlled: true, wrap: func(tr driver.Transport) driver.Transport {
				return &wrapped{Transport: tr, recv: func(w *wrapped, b []byte) bool {
					h, _, err := encap.ParseHeader(b)
					return err != nil || h.Type() == encap.MsgTLP || h.Type() == encap.MsgControl || h.BodyLen() == 0
				}}
			}}
		}},
	{rule: "CTL-1", broken: "sends a copy of every KEEPALIVE with control version 2", want: "control version 2",
		setup: outOnly(copyOf(isCtl(encap.CtlKeepalive), func(b []byte) { b[encap.HeaderLen+1] = 2 }))},
	{rule: "CTL-2", broken: "sends a copy of every HELLO with window 0", want: "window is 0",
		setup: outOnly(copyOf(isCtl(encap.CtlHello), func(b []byte) { binary.BigEndian.PutUint16(b[encap.HeaderLen+12:], 0) }))},
	{rule: "CTL-3", broken: "answers KEEPALIVE probe n with probe n^0x80", want: "never sent",
		scenarios: []string{"reset"},
		setup: outOnly(func(s *faultState, b []byte) [][]byte {
			if isCtl(encap.CtlKeepaliveAck)(b) {
				b[encap.HeaderLen+3] ^= 0x80
			}
			return [][]byte{b}
		})},
	{rule: "CTL-4", broken: "sends a RESET of reason 9", test: "TestMonitorRulesFail/CTL-4"},
	{rule: "HSK-1", broken: "sends one HELLO per session, never repeated", want: "HELLO in all",
		setup: outOnly(func(s *faultState, b []byte) [][]byte {
			if !isCtl(encap.CtlHello)(b) {
				return [][]byte{b}
			}
			n := ctlSession(b)
			if s.seen[n] {
				return nil
			}
			s.seen[n] = true
			return [][]byte{b}
		})},
	{rule: "HSK-2", broken: "echoes a wrong peer session in its HELLO and HELLO-ACK", want: "no HELLO-ACK echoing",
		setup: outOnly(func(s *faultState, b []byte) [][]byte {
			if isCtl(encap.CtlHello)(b) || isCtl(encap.CtlHelloAck)(b) {
				b[encap.HeaderLen+11] ^= 1
			}
			return [][]byte{b}
		})},
	{rule: "HSK-3", broken: "never comes up: sends HELLO and HELLO-ACK only", want: "no frame with Ack and credits",
		setup: outOnly(func(s *faultState, b []byte) [][]byte {
			if isCtl(encap.CtlHello)(b) || isCtl(encap.CtlHelloAck)(b) {
				return [][]byte{b}
			}
			return nil
		})},
	{rule: "HSK-4", broken: "shows every session under the nonce of its first", test: "TestReusingSessionNonceFails"},
	{rule: "HSK-5", broken: "takes 0 completion credits from the peer's HELLO instead of 1", want: "on the 1 CplH credit",
		scenarios: []string{"credit-frames"},
		setup: func() setup {
			return setup{controlled: true, wrap: func(tr driver.Transport) driver.Transport {
				return &wrapped{Transport: tr, recv: func(w *wrapped, b []byte) bool {
					if _, body, ok := ctlBody(b); ok && len(body) >= encap.HelloLen && (body[0] == byte(encap.CtlHello) || body[0] == byte(encap.CtlHelloAck)) && body[25] == 1 {
						body[25] = 0
					}
					return true
				}}
			}}
		}},
	{rule: "HSK-6", broken: "completes a handshake on an ACK frame whatever its Ack", want: "completed the handshake",
		scenarios: []string{"handshake-edges"},
		setup: func() setup {
			return setup{controlled: true, wrap: func(tr driver.Transport) driver.Transport {
				var isn uint32
				return &wrapped{Transport: tr, send: func(w *wrapped, b []byte) {
					if _, body, ok := ctlBody(b); ok && len(body) >= encap.HelloLen && body[0] == byte(encap.CtlHelloAck) {
						isn = encap.Header(b).Seq()
					}
				}, recv: func(w *wrapped, b []byte) bool {
					// The kit's stale Ack becomes the ISN.
					if h, _, err := encap.ParseHeader(b); err == nil && h.Type() == encap.MsgAck && h.Ack()-isn == 0x10000 {
						h.SetAck(isn)
					}
					return true
				}}
			}}
		}},
	{rule: "TMR-1", broken: "runs a Keepalive above its DeadAfter", test: "TestMonitorRulesFail/TMR-1"},
	{rule: "TMR-2", none: fixedNA["TMR-2"]},
	{rule: "SEQ-1", broken: "announces ISN n+1 in its HELLO and numbers its first TLP n", want: "precedes the ISN",
		drags: []string{"FRM-11", "ACK-1"}, why: "its HELLO's Seq is the ISN it uses, not the one it announces (FRM-11); the kit drops the read's completion as numbered before the ISN, so an acknowledged read is never completed (ACK-1)",
		scenarios: []string{"exchange"},
		setup: func() setup {
			return faulty(func(s *faultState, b []byte) [][]byte {
				if isCtl(encap.CtlHello)(b) || isCtl(encap.CtlHelloAck)(b) {
					isn := b[encap.HeaderLen+16:]
					binary.BigEndian.PutUint32(isn, binary.BigEndian.Uint32(isn)+1)
				}
				return [][]byte{b}
			}, func(s *faultState, b []byte) []byte {
				// Its Acks are its own: the kit's, one less.
				if h, _, err := encap.ParseHeader(b); err == nil && h.Flags()&encap.FlagAck != 0 {
					h.SetAck(h.Ack() - 1)
				}
				return b
			})
		}},
	{rule: "SEQ-2", broken: "retransmits a TLP with its last byte changed", want: "other bytes",
		scenarios: []string{"loss-from-iut"},
		setup: outOnly(func(s *faultState, b []byte) [][]byte {
			eachTLP(b, func(seq uint32, t []byte) {
				if s.sent[seq] {
					t[len(t)-1] ^= 0xff
				}
				s.sent[seq] = true
			})
			return [][]byte{b}
		})},
	{rule: "SEQ-3", broken: "delivers TLPs in the order they arrive (takes a TLP beyond a hole as the next expected)", want: "behind the hole",
		drags: []string{"NAK-1", "ACK-1"}, why: "it never sees the hole, so it sends no NAK, and its Ack covers the hole before the kit sent it",
		scenarios: []string{"loss-to-iut"},
		setup: inOnly(func(s *faultState, b []byte) []byte {
			if isCtl(encap.CtlHello)(b) || isCtl(encap.CtlHelloAck)(b) {
				if isn := binary.BigEndian.Uint32(b[encap.HeaderLen+16:]); isn != s.isn || !s.isnSeen {
					s.isn, s.isnSeen, s.next = isn, true, isn // the kit's new session
				}
			}
			h, _, err := encap.ParseHeader(b)
			if err != nil || h.Type() != encap.MsgTLP || h.PairID() != 42 || !s.isnSeen {
				return b
			}
			if seqLT(s.next, h.Seq()) && seqLT(h.Seq()-s.next, 64) {
				h.SetSeq(s.next)
			}
			if end := h.Seq() + uint32(h.Count()); seqLT(s.next, end) && seqLT(end-s.next, 64) {
				s.next = end
			}
			return b
		})},
	{rule: "SEQ-4", broken: "holds nothing out of order (a reorder window of one TLP)", want: "neither SACKed nor held",
		scenarios: []string{"loss-to-iut"},
		setup:     func() setup { return setup{controlled: true, bridgeWindow: 1} }},
	{rule: "ACK-1", broken: "acknowledges a read before delivering it, then loses it", test: "TestAckBeforeDeliveryFails",
		drags: []string{"ACK-2"}, why: "the bridge's own Acks then go back behind the early one"},
	{rule: "ACK-2", broken: "follows every ACK frame with a copy whose Ack is one less", want: "went back",
		scenarios: []string{"exchange"},
		setup: outOnly(func(s *faultState, b []byte) [][]byte {
			if !isType(encap.MsgAck)(b) {
				return [][]byte{b}
			}
			c := append([]byte(nil), b...)
			encap.Header(c).SetAck(encap.Header(c).Ack() - 1)
			return [][]byte{b, c}
		})},
	{rule: "ACK-3", broken: "sends its first KEEPALIVE once up without the credit flag", want: "without valid Ack and credits",
		setup: outOnly(func(s *faultState, b []byte) [][]byte {
			if !s.done && isCtl(encap.CtlKeepalive)(b) && encap.Header(b).Flags()&encap.FlagAck != 0 {
				s.done = true
				encap.Header(b).SetVersionFlags(encap.Version, encap.Header(b).Flags()&^encap.FlagCredit)
			}
			return [][]byte{b}
		})},
	{rule: "ACK-4", broken: "sets a SACK bit for a TLP 6 beyond its Ack in every ACK frame", want: "SACK bit",
		scenarios: []string{"exchange"},
		setup: outOnly(func(s *faultState, b []byte) [][]byte {
			if isType(encap.MsgAck)(b) {
				h := encap.Header(b)
				h.SetVersionFlags(encap.Version, h.Flags()|encap.FlagSack)
				h.SetSack(1 << 5)
			}
			return [][]byte{b}
		})},
	{rule: "ACK-5", broken: "never acknowledges: every Ack it sends stays at the kit's ISN", want: "not acknowledged within",
		scenarios: []string{"exchange"},
		setup: func() setup {
			return faulty(func(s *faultState, b []byte) [][]byte {
				if h, _, err := encap.ParseHeader(b); err == nil && h.Flags()&encap.FlagAck != 0 && s.isnSeen {
					h.SetAck(s.isn)
				}
				return [][]byte{b}
			}, func(s *faultState, b []byte) []byte {
				if isCtl(encap.CtlHello)(b) || isCtl(encap.CtlHelloAck)(b) {
					s.isn, s.isnSeen = binary.BigEndian.Uint32(b[encap.HeaderLen+16:]), true
				}
				return b
			})
		}},
	{rule: "NAK-1", broken: "never sends a NAK", want: "no NAK for the hole",
		scenarios: []string{"loss-to-iut"},
		setup: outOnly(func(s *faultState, b []byte) [][]byte {
			if isType(encap.MsgNak)(b) {
				return nil
			}
			return [][]byte{b}
		})},
	{rule: "NAK-2", broken: "ignores NAKs and SACK bits (retransmits on its RTO alone, here 300 ms)", want: "after the kit's NAK",
		scenarios: []string{"loss-from-iut"},
		setup: func() setup {
			su := faulty(nil, func(s *faultState, b []byte) []byte {
				if isType(encap.MsgNak)(b) {
					return nil
				}
				if h, _, err := encap.ParseHeader(b); err == nil && h.Flags()&encap.FlagSack != 0 {
					h.SetVersionFlags(encap.Version, h.Flags()&^encap.FlagSack)
					h.SetSack(0)
				}
				return b
			})
			su.config = func(c *bridge.Config) {
				c.InitialRTO, c.MinRTO, c.MaxRTO = 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond
			}
			su.opts = func(o *Options) { o.Timers.MaxRTO = 300 * time.Millisecond }
			return su
		}},
	{rule: "RTX-1", broken: "sends a copy of every TLP frame numbered 100 ahead (the kit's window is 64)", want: "beyond the next expected",
		scenarios: []string{"exchange"},
		setup:     outOnly(copyOf(isType(encap.MsgTLP), func(b []byte) { encap.Header(b).SetSeq(encap.Header(b).Seq() + 100) }))},
	{rule: "RTX-2", none: fixedNA["RTX-2"]},
	{rule: "RTX-3", broken: "never retransmits on its RTO (only on a NAK)", want: "not retransmitted",
		scenarios: []string{"loss-from-iut"}, setup: rtoNever},
	{rule: "RTX-4", none: fixedNA["RTX-4"]},
	{rule: "CRD-1", broken: "starts a session's limits below the initial credits of its HELLO", test: "TestMonitorRulesFail/CRD-1"},
	{rule: "CRD-2", broken: "reads every HELLO as advertising infinite credits", test: "TestIgnoringCreditsFails"},
	{rule: "CRD-3", broken: "flips the PH bit of the infinite mask in every header", want: "infinite mask",
		setup: outOnly(func(s *faultState, b []byte) [][]byte {
			if h, _, err := encap.ParseHeader(b); err == nil && h.Flags()&encap.FlagCredit != 0 {
				b[26] ^= 1 << encap.CreditPH
			}
			return [][]byte{b}
		})},
	{rule: "CRD-4", broken: "advertises posted-data limits 1 Mi units beyond its buffers", test: "TestDataCreditsBeyondBuffersFail"},
	{rule: "CRD-5", broken: "never returns PH credits: its PH limit stays at the first it sent", want: "PH limit",
		scenarios: []string{"exchange"},
		setup: outOnly(func(s *faultState, b []byte) [][]byte {
			if isCtl(encap.CtlHello)(b) || isCtl(encap.CtlHelloAck)(b) {
				s.limSet = false // a new session has its own first limit
			}
			h, _, err := encap.ParseHeader(b)
			if err != nil || h.Flags()&encap.FlagCredit == 0 || h.Infinite(encap.CreditPH) {
				return [][]byte{b}
			}
			if !s.limSet {
				s.lim, s.limSet = h.CreditLimit(encap.CreditPH), true
			}
			h.SetCreditLimit(encap.CreditPH, s.lim, false)
			return [][]byte{b}
		})},
	{rule: "CRD-6", broken: "ignores credit updates: holds the completion-header limit at the peer's initial credits", want: "did not resume",
		scenarios: []string{"credits"},
		setup: func() setup {
			return faulty(nil, func(s *faultState, b []byte) []byte {
				if isCtl(encap.CtlHello)(b) || isCtl(encap.CtlHelloAck)(b) {
					s.lim, s.limSet = uint32(binary.BigEndian.Uint16(b[encap.HeaderLen+24:])), true
				}
				if h, _, err := encap.ParseHeader(b); err == nil && h.Flags()&encap.FlagCredit != 0 && !h.Infinite(encap.CreditCplH) &&
					s.limSet && uint16(h.CreditLimit(encap.CreditCplH)-s.lim) < 0x8000 {
					h.SetCreditLimit(encap.CreditCplH, s.lim, false)
				}
				return b
			})
		}},
	{rule: "CRD-7", none: fixedNA["CRD-7"]},
	{rule: "CRD-8", broken: "honours the infinite mask of frame headers (a header claiming CplH infinite raises its CplH limit)", want: "header claiming CplH infinite",
		drags: []string{"CRD-2"}, why: "the limit it raised is one the kit never gave: its completion goes beyond the kit's CplH limit",
		scenarios: []string{"credit-frames"},
		setup: func() setup {
			return setup{controlled: true, wrap: func(tr driver.Transport) driver.Transport {
				return &wrapped{Transport: tr, recv: func(w *wrapped, b []byte) bool {
					h, _, err := encap.ParseHeader(b)
					if err == nil && h.Flags()&encap.FlagCredit != 0 && h.InfiniteMask()&(1<<encap.CreditCplH) != 0 {
						h.SetCreditLimit(encap.CreditCplH, h.CreditLimit(encap.CreditCplH)+1, false)
					}
					return true
				}}
			}}
		}},
	{rule: "ORD-1", broken: "its local side applies each write after the next", want: "the second write passed it",
		scenarios: []string{"completions"},
		setup:     func() setup { return setup{controlled: true, stub: func(s *Stub) { s.swapWrites = true }} }},
	{rule: "ORD-2", broken: "a FIFO local side: nothing passes a read of the local side until the read is sent", want: "stayed behind a read",
		scenarios: []string{"ordering"}, local: true, setup: fifoLocal},
	{rule: "ORD-3", broken: "swaps a posted write and the read behind it in a frame", test: "TestReadPassingWriteFails"},
	{rule: "ORD-4", broken: "swaps a posted write and the completion behind it in a frame", want: "before the earlier write",
		scenarios: []string{"ordering"}, local: true,
		setup: outOnly(func(s *faultState, b []byte) [][]byte {
			swapInFrame(b, func(a, c tlp.View) bool { return a.Kind() == tlp.MWr && c.Kind().IsCompletion() })
			return [][]byte{b}
		})},
	{rule: "ORD-5", broken: "its local side sends a split read's completions last first", want: "out of order",
		scenarios: []string{"completions"},
		setup:     func() setup { return setup{controlled: true, stub: func(s *Stub) { s.reverseSplit = true }} }},
	{rule: "TAG-1", broken: "gives every request it sends wire tag 0", test: "TestReusingTagsFails", local: true},
	{rule: "TAG-2", broken: "sends 8-bit-tag peers wire tags 256 up (and maps the completions back)", want: "outside the kit's",
		scenarios: []string{"tags"}, local: true,
		setup: func() setup {
			return faulty(func(s *faultState, b []byte) [][]byte {
				eachTLP(b, func(_ uint32, t []byte) {
					if v := tlp.View(t); v.Kind().IsNonPosted() && v.Tag() < 256 {
						v.SetTag(v.Tag() + 256)
					}
				})
				return [][]byte{b}
			}, func(s *faultState, b []byte) []byte {
				eachTLP(b, func(_ uint32, t []byte) {
					if v := tlp.View(t); v.Kind().IsCompletion() && v.Tag() >= 256 {
						v.SetTag(v.Tag() - 256)
					}
				})
				return b
			})
		}},
	{rule: "TAG-3", broken: "puts another requester ID in every completion it sends", want: "matches no request",
		scenarios: []string{"exchange"},
		setup: outOnly(func(s *faultState, b []byte) [][]byte {
			eachTLP(b, func(_ uint32, t []byte) {
				if v := tlp.View(t); v.Kind().IsCompletion() {
					v.SetRequesterID(tlp.NewID(0x55, 0, 0))
				}
			})
			return [][]byte{b}
		})},
	{rule: "TAG-4", broken: "answers a request that timed out with UR instead of CA", want: "want CA",
		scenarios: []string{"completion-timeout"}, local: true, setup: statusTo(tlp.StatusCA, tlp.StatusUR)},
	{rule: "TAG-5", broken: "drops the fifth read of its local side", want: "only 7 of 8",
		drags: []string{"TAG-1"}, why: "the local side never gets a completion for the dropped read",
		scenarios: []string{"tags"}, local: true,
		setup: func() setup {
			var n int
			return setup{controlled: true, local: func(_ context.Context, b []byte) bool {
				if tlp.View(b).Kind() != tlp.MRd {
					return true
				}
				n++
				return n != 5
			}}
		}},
	{rule: "TAG-6", broken: "its local side splits even an 8-byte read", want: "completions, want 1",
		scenarios: []string{"completions"},
		setup:     func() setup { return setup{controlled: true, stub: func(s *Stub) { s.splitSmall = true }} }},
	{rule: "IDT-1", none: fixedNA["IDT-1"]},
	{rule: "IDT-2", none: fixedNA["IDT-2"]},
	{rule: "IDT-3", none: fixedNA["IDT-3"]},
	{rule: "LNK-1", broken: "sends only the first KEEPALIVE of each session", want: "KEEPALIVE",
		setup: outOnly(func(s *faultState, b []byte) [][]byte {
			if isCtl(encap.CtlKeepalive)(b) {
				n := ctlSession(b)
				if s.seen[n] {
					return nil
				}
				s.seen[n] = true
			}
			return [][]byte{b}
		})},
	{rule: "LNK-2", broken: "never declares the link down (DeadAfter an hour)", want: "still in session",
		scenarios: []string{"flap-long"},
		setup: func() setup {
			return setup{config: func(c *bridge.Config) { c.DeadAfter = time.Hour }}
		}},
	{rule: "LNK-3", broken: "never retransmits on its RTO (a completion lost in an outage stays lost)", want: "not retransmitted",
		scenarios: []string{"flap-short"}, setup: rtoNever},
	{rule: "LNK-4", broken: "answers requests outstanding at link-down with CA instead of UR", want: "want UR",
		scenarios: []string{"flap-long"}, local: true, setup: statusTo(tlp.StatusUR, tlp.StatusCA)},
	{rule: "LNK-5", broken: "announces the ISN of its first session in every HELLO", want: "reuses the old ISN",
		scenarios: []string{"flap-long"}, setup: oneSession(false)},
	{rule: "LNK-6", broken: "honours a RESET whatever session it names", want: "ended the session",
		scenarios: []string{"reset"},
		setup: func() setup {
			return faulty(func(s *faultState, b []byte) [][]byte {
				if isCtl(encap.CtlHello)(b) || isCtl(encap.CtlHelloAck)(b) {
					s.session = ctlSession(b)
				}
				return [][]byte{b}
			}, func(s *faultState, b []byte) []byte {
				if isCtl(encap.CtlReset)(b) {
					binary.BigEndian.PutUint32(b[encap.HeaderLen+8:], s.session)
				}
				return b
			})
		}},
	{rule: "LNK-7", broken: "keeps its session when the peer starts a new one (shows every session as its first: nonce, ISN, numbers)", want: "kept its session",
		scenarios: []string{"exchange"}, setup: oneSession(true)},
	{rule: "LNK-8", broken: "its HELLOs after going down name the peer session it had", want: "peer session",
		scenarios: []string{"reset"},
		setup: func() setup {
			return setup{controlled: true, wrap: func(tr driver.Transport) driver.Transport {
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
			}}
		}},
	{rule: "KEY-1", broken: "sets the sealed bit in every frame of an unkeyed pair", want: "sealed bit",
		setup: outOnly(func(s *faultState, b []byte) [][]byte {
			if len(b) > 0 {
				b[0] |= 0x08
			}
			return [][]byte{b}
		})},
	{rule: "KEY-2", broken: "a keyed peer that sends its KEEPALIVEs unsealed", test: "TestKeyedNegative/unsealed frames sent"},
	{rule: "KEY-3", broken: "a keyed peer that takes unsealed frames", test: "TestKeyedNegative/unsealed frames taken"},
	{rule: "KEY-4", broken: "a keyed peer with the same key nonce in every session", test: "TestKeyedNegative/key nonce reused"},
	{rule: "KEY-5", broken: "a keyed peer that seals its HELLO-ACK under the session keys once it has some", test: "TestKeyedNegative/HELLO-ACK under session keys",
		drags: []string{"KEY-4"}, why: "the kit reads key nonces from the HELLO-ACKs it can open"},
	{rule: "KEY-6", broken: "a keyed peer that never rekeys (RekeyAfter 8 packets)", test: "TestKeyedNegative/never rekeys"},
	{rule: "KEY-7", broken: "a keyed peer that retires the previous epoch's key at once", test: "TestKeyedNegative/previous key retired at once"},
	{rule: "KEY-8", broken: "a keyed peer without the next key generation installed", test: "TestKeyedNegative/next key not installed"},
	{rule: "KEY-9", none: fixedNA["KEY-9"]},
	{rule: "KEY-10", none: fixedNA["KEY-10"]},
	{rule: "KEY-11", none: fixedNA["KEY-11"]},
	{rule: "KEY-12", none: fixedNA["KEY-12"]},
	{rule: "KEY-13", none: fixedNA["KEY-13"]},
}

// executedUnnumbered is why executing a frame it must drop fails more.
const executedUnnumbered = "the kit never numbered the TLP the bridge executes: the bridge's Ack (ACK-1) and PH limit (CRD-4) count it, and its read's completion answers no request of the kit (TAG-3)"

// faultState is a broken bridge's memory, for its hooks.
type faultState struct {
	seen    map[uint32]bool
	sent    map[uint32]bool
	done    bool
	isn     uint32
	isnSeen bool
	next    uint32
	session uint32
	lim     uint32
	limSet  bool
	// oneSession
	first, cur       uint32 // session nonces
	firstISN, curISN uint32
}

// fault is the transport of a broken bridge: out turns each frame the
// bridge sends into the frames that go on the wire (none, it changed, or
// more), in turns each frame for the bridge into what it gets (nil: none).
// Both get copies they may change.
type fault struct {
	driver.Transport
	mu  sync.Mutex
	st  faultState
	out func(s *faultState, b []byte) [][]byte
	in  func(s *faultState, b []byte) []byte
}

func (f *fault) Send(b []byte) error {
	if f.out == nil {
		return f.Transport.Send(b)
	}
	f.mu.Lock()
	frames := f.out(&f.st, append([]byte(nil), b...))
	f.mu.Unlock()
	for _, x := range frames {
		if err := f.Transport.Send(x); err != nil {
			return err
		}
	}
	return nil
}

func (f *fault) Recv(buf []byte) (int, error) {
	for {
		n, err := f.Transport.Recv(buf)
		if err != nil || f.in == nil {
			return n, err
		}
		f.mu.Lock()
		x := f.in(&f.st, append([]byte(nil), buf[:n]...))
		f.mu.Unlock()
		if x != nil {
			return copy(buf, x), nil
		}
	}
}

// faulty is the setup of a bridge behind a fault with hooks out and in
// (either may be nil), its local side controlled by the kit.
func faulty(out func(*faultState, []byte) [][]byte, in func(*faultState, []byte) []byte) setup {
	return setup{controlled: true, wrap: func(tr driver.Transport) driver.Transport {
		return &fault{Transport: tr, out: out, in: in, st: faultState{seen: map[uint32]bool{}, sent: map[uint32]bool{}}}
	}}
}

func outOnly(out func(*faultState, []byte) [][]byte) func() setup {
	return func() setup { return faulty(out, nil) }
}

func inOnly(in func(*faultState, []byte) []byte) func() setup {
	return func() setup { return faulty(nil, in) }
}

// copyOf sends the frames that match and after each a copy changed by
// change.
func copyOf(match func([]byte) bool, change func([]byte)) func(*faultState, []byte) [][]byte {
	return func(_ *faultState, b []byte) [][]byte {
		if !match(b) {
			return [][]byte{b}
		}
		c := append([]byte(nil), b...)
		change(c)
		return [][]byte{b, c}
	}
}

func isType(t encap.MsgType) func([]byte) bool {
	return func(b []byte) bool {
		h, _, err := encap.ParseHeader(b)
		return err == nil && h.Type() == t
	}
}

func isCtl(t encap.ControlType) func([]byte) bool {
	return func(b []byte) bool {
		h, _, err := encap.ParseHeader(b)
		return err == nil && h.Type() == encap.MsgControl && len(h.Body()) >= encap.ControlLen && encap.ControlType(h.Body()[0]) == t
	}
}

// ctlSession is the session of a control frame.
func ctlSession(b []byte) uint32 { return binary.BigEndian.Uint32(b[encap.HeaderLen+4:]) }

// eachTLP calls f on each TLP of a well-formed TLP frame, in place.
func eachTLP(b []byte, f func(seq uint32, t []byte)) {
	h, trunc, err := encap.ParseHeader(b)
	if err != nil || trunc || h.Type() != encap.MsgTLP {
		return
	}
	off := encap.HeaderLen + 2*h.Count()
	for i := 0; i < h.Count(); i++ {
		l := h.TLPLen(i)
		if off+l > len(b) {
			return
		}
		f(h.Seq()+uint32(i), b[off:off+l])
		off += l
	}
}

// swapInFrame swaps the first pair of adjacent TLPs in a TLP frame for
// which swap holds, so the second goes out under the first's number.
func swapInFrame(b []byte, swap func(a, c tlp.View) bool) {
	h, trunc, err := encap.ParseHeader(b)
	if err != nil || trunc || h.Type() != encap.MsgTLP {
		return
	}
	off := encap.HeaderLen + 2*h.Count()
	for i := 0; i+1 < h.Count(); i++ {
		l0, l1 := h.TLPLen(i), h.TLPLen(i+1)
		a, c := tlp.View(b[off:off+l0]), tlp.View(b[off+l0:off+l0+l1])
		if swap(a, c) {
			swapped := append(append([]byte(nil), c...), a...)
			copy(b[off:], swapped)
			binary.BigEndian.PutUint16(b[encap.HeaderLen+2*i:], uint16(l1))
			binary.BigEndian.PutUint16(b[encap.HeaderLen+2*i+2:], uint16(l0))
			return
		}
		off += l0
	}
}

// rtoNever is a bridge whose retransmissions on its RTO are lost (those
// on a NAK still go out).
func rtoNever() setup {
	nak := map[uint32]bool{}
	return faulty(func(s *faultState, b []byte) [][]byte {
		if isCtl(encap.CtlHello)(b) {
			clear(s.sent)
		}
		keep := true
		eachTLP(b, func(seq uint32, _ []byte) {
			if s.sent[seq] && !nak[seq] {
				keep = false
			}
			delete(nak, seq)
			s.sent[seq] = true
		})
		if !keep {
			return nil
		}
		return [][]byte{b}
	}, func(s *faultState, b []byte) []byte {
		if h, _, err := encap.ParseHeader(b); err == nil && h.Type() == encap.MsgNak && h.Flags()&encap.FlagAck != 0 {
			nak[h.Ack()] = true
		}
		return b
	})
}

// statusTo is a bridge that hands its local side completions of status
// from with status to instead.
func statusTo(from, to tlp.Status) func() setup {
	return func() setup {
		return setup{controlled: true, deliver: func(v tlp.View) {
			if v.Kind().IsCompletion() && v.Status() == from {
				v[6] = v[6]&0x1f | byte(to)<<5
			}
		}}
	}
}

// fifoLocal is a bridge whose local side queue is FIFO: after a read it
// takes nothing more from the local side until that read is on the wire.
func fifoLocal() setup {
	var mu sync.Mutex
	var pending chan struct{} // closed when the read held for is sent
	su := faulty(func(s *faultState, b []byte) [][]byte {
		eachTLP(b, func(_ uint32, t []byte) {
			mu.Lock()
			defer mu.Unlock()
			if v := tlp.View(t); v.Kind() == tlp.MRd && v.Address() >= kitMemory && pending != nil {
				close(pending)
				pending = nil
			}
		})
		return [][]byte{b}
	}, nil)
	su.local = func(ctx context.Context, b []byte) bool {
		mu.Lock()
		p := pending
		mu.Unlock()
		if p != nil {
			select {
			case <-p:
			case <-ctx.Done():
				return false
			}
		}
		if tlp.View(b).Kind() == tlp.MRd {
			mu.Lock()
			pending = make(chan struct{})
			mu.Unlock()
		}
		return true
	}
	return su
}

// oneSession is a bridge that shows every session with the ISN of its
// first (and with nonce, its nonce too) in its HELLOs, its sequence
// numbers moved to match, and the kit's echoes and Acks moved back.
func oneSession(nonce bool) func() setup {
	return func() setup { return oneSessionSetup(nonce) }
}

func oneSessionSetup(nonce bool) setup {
	return faulty(func(s *faultState, b []byte) [][]byte {
		h, _, err := encap.ParseHeader(b)
		if err != nil {
			return [][]byte{b}
		}
		if isCtl(encap.CtlHello)(b) || isCtl(encap.CtlHelloAck)(b) {
			body := h.Body()
			s.cur, s.curISN = ctlSession(b), binary.BigEndian.Uint32(body[16:])
			if s.first == 0 {
				s.first, s.firstISN = s.cur, s.curISN
			}
			binary.BigEndian.PutUint32(body[16:], s.firstISN)
		}
		if nonce && h.Type() == encap.MsgControl && len(h.Body()) >= encap.ControlLen && ctlSession(b) == s.cur && s.first != 0 {
			binary.BigEndian.PutUint32(h.Body()[4:], s.first)
		}
		if s.first != 0 { // every frame's Seq: a HELLO's is its ISN (FRM-11)
			h.SetSeq(h.Seq() - s.curISN + s.firstISN)
		}
		return [][]byte{b}
	}, func(s *faultState, b []byte) []byte {
		h, _, err := encap.ParseHeader(b)
		if err != nil || s.first == 0 {
			return b
		}
		if nonce && h.Type() == encap.MsgControl && len(h.Body()) >= encap.ControlLen {
			if p := h.Body()[8:12]; binary.BigEndian.Uint32(p) == s.first {
				binary.BigEndian.PutUint32(p, s.cur)
			}
		}
		if h.Flags()&encap.FlagAck != 0 {
			h.SetAck(h.Ack() - s.firstISN + s.curISN)
		}
		return b
	})
}

// TestNegativeCases runs every rule's broken implementation: the kit fails
// that rule for the reason the case names, and no other but the ones the
// case drags along (or a scheduling delay of the bridge, see
// expectOnlyFail). A run that misses is run again, twice at most: on a
// loaded machine the in-process bridge can starve long enough to fail a
// handshake; a breakage fails every run.
func TestNegativeCases(t *testing.T) {
	t.Parallel()
	for _, c := range negatives {
		if c.setup == nil {
			continue
		}
		t.Run(c.rule, func(t *testing.T) {
			t.Parallel()
			var problems []string
			for try := 1; try <= 3; try++ {
				rep, err := runKit(t, c.setup(), append([]string{"handshake"}, c.scenarios...)...)
				if problems = c.judge(rep, err); len(problems) == 0 {
					return
				}
				t.Logf("run %d: %s", try, strings.Join(problems, "; "))
			}
			for _, p := range problems {
				t.Error(p)
			}
		})
	}
}

// judge says what is wrong with a run of c's broken implementation.
func (c negCase) judge(rep Report, err error) []string {
	if err != nil {
		return []string{fmt.Sprintf("kit: %v", err)}
	}
	var out []string
	r, _ := rep.Result(c.rule)
	switch {
	case r.Verdict != Fail:
		out = append(out, fmt.Sprintf("%s: %s (%s), want a failure: %s", c.rule, r.Verdict, r.Reason, c.broken))
	case !strings.Contains(r.Reason, c.want) && !schedulingRules[c.rule]:
		// A scheduling rule may have failed first for a stall.
		out = append(out, fmt.Sprintf("%s fails for %q, want a reason containing %q", c.rule, r.Reason, c.want))
	}
	for _, f := range rep.Failed() {
		if f.Rule != c.rule && !slices.Contains(c.drags, f.Rule) && !schedulingRules[f.Rule] {
			out = append(out, fmt.Sprintf("%s fails too: %s", f.Rule, f.Reason))
		}
	}
	return out
}

var updateTable = flag.Bool("update", false, "rewrite the table of negative cases in docs/conformance.md")

// conformanceDoc holds the table of rules and their negative cases.
const conformanceDoc = "../../../docs/conformance.md"

const (
	tableBegin = "<!-- negative-cases: begin (generated by go test ./internal/app/conform -run TestNegativeCasesDocumented -update) -->\n"
	tableEnd   = "<!-- negative-cases: end -->\n"
)

// negativeTable renders the table of docs/conformance.md from negatives.
func negativeTable() string {
	var b strings.Builder
	b.WriteString("| Rule | Broken implementation | Negative case | Also fails | Outside the process |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, c := range negatives {
		var neg string
		switch {
		case c.setup != nil:
			neg = fmt.Sprintf("`TestNegativeCases/%s` (%s)", c.rule, strings.Join(append([]string{"handshake"}, c.scenarios...), ", "))
		case c.test != "":
			neg = "`" + c.test + "`"
		default:
			neg = "none: " + c.none
		}
		also := "-"
		if len(c.drags) > 0 {
			also = strings.Join(c.drags, ", ") + ": " + c.why
		}
		wire := "judged"
		switch {
		case c.none != "":
			wire = "n/a"
		case c.local:
			wire = "needs the test target (--doorbell) or the local side (Options.Stub)"
		}
		broken := c.broken
		if broken == "" {
			broken = "-"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", c.rule, broken, neg, also, wire)
	}
	return b.String()
}

// TestNegativeCasesDocumented: every rule the kit judges has one row in
// negatives, in the catalogue's order, with a negative case (a broken
// bridge run here, or a test function of this package that exists) or the
// reason it has none; docs/conformance.md shows the table as generated
// (-update rewrites it).
func TestNegativeCasesDocumented(t *testing.T) {
	t.Parallel()
	var ids []string
	for _, r := range Rules() {
		ids = append(ids, r.ID)
	}
	var rows []string
	for _, c := range negatives {
		rows = append(rows, c.rule)
	}
	if !slices.Equal(rows, ids) {
		t.Errorf("negatives has rows for\n%v\nthe catalogue judges\n%v\n(one row per rule, in the catalogue's order)", rows, ids)
	}
	tests := testFuncs(t)
	for _, c := range negatives {
		kinds := 0
		for _, set := range []bool{c.setup != nil, c.test != "", c.none != ""} {
			if set {
				kinds++
			}
		}
		switch {
		case kinds != 1:
			t.Errorf("%s: want exactly one of setup, test and none", c.rule)
		case c.broken == "" && c.none == "":
			t.Errorf("%s: the row does not say what is broken", c.rule)
		case c.setup != nil && c.want == "":
			t.Errorf("%s: no reason text (want) to tell this failure from another", c.rule)
		case c.test != "" && !testExists(tests, c.test):
			t.Errorf("%s: negative case %s is not a test function (or a subtest of one) of this package", c.rule, c.test)
		case (c.none != "") != (fixedNA[c.rule] != ""):
			t.Errorf("%s: a rule has no negative case (none) if and only if it is n/a on every run (fixedNA)", c.rule)
		case len(c.drags) > 0 && c.why == "":
			t.Errorf("%s: drags %v without saying why", c.rule, c.drags)
		}
		for _, d := range c.drags {
			if !slices.Contains(ids, d) || d == c.rule {
				t.Errorf("%s: drags %s, not another rule of the catalogue", c.rule, d)
			}
		}
	}
	doc, err := os.ReadFile(conformanceDoc)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i, j := strings.Index(s, tableBegin), strings.Index(s, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no table between %q and %q", conformanceDoc, tableBegin, tableEnd)
	}
	want := negativeTable()
	if got := s[i+len(tableBegin) : j]; got != want {
		if !*updateTable {
			t.Fatalf("the table in %s drifted from negatives (go test ./internal/app/conform -run TestNegativeCasesDocumented -update rewrites it):\n%s", conformanceDoc, want)
		}
		if err := os.WriteFile(conformanceDoc, []byte(s[:i+len(tableBegin)]+want+s[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the table in %s", conformanceDoc)
	}
}

// testExists says whether name is a test function of tests or, as
// TestX/NAME, a subtest of one named by a string literal in it.
func testExists(tests map[string]map[string]bool, name string) bool {
	fn, sub, ok := strings.Cut(name, "/")
	return tests[fn] != nil && (!ok || tests[fn][strconv.Quote(sub)])
}

// testFuncs returns this package's test functions, each with the string
// literals in it (as written, quoted).
func testFuncs(t *testing.T) map[string]map[string]bool {
	t.Helper()
	files, err := filepath.Glob("*_test.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files (%v)", err)
	}
	out := map[string]map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && strings.HasPrefix(fd.Name.Name, "Test") {
				lits := map[string]bool{}
				ast.Inspect(fd, func(n ast.Node) bool {
					if l, ok := n.(*ast.BasicLit); ok && l.Kind == token.STRING {
						lits[l.Value] = true
					}
					return true
				})
				out[fd.Name.Name] = lits
			}
		}
	}
	return out
}

// A bridge that restarts in the middle of the ordering scenario (a HELLO
// of a new session right after the write the scenario waits for) leaves
// the kit without the requests it was to complete: the scenario ends, the
// kit does not panic (it did, completing a request it no longer had).
func TestOrderingSurvivesRestart(t *testing.T) {
	t.Parallel()
	hello := encap.Control{Type: encap.CtlHello, Role: encap.RoleGPU, TagBits: 8, Session: 0x0bad5e55, Window: 64, MaxTLP: 532, ISN: 100}
	hb := make([]byte, encap.HeaderLen)
	h := encap.Header(hb)
	h.SetVersionFlags(encap.Version, 0)
	h.SetType(encap.MsgControl)
	h.SetPairID(42)
	h.SetBodyLen(encap.HelloLen)
	hb = hello.AppendTo(hb)
	su := faulty(func(s *faultState, b []byte) [][]byte {
		restart := false
		eachTLP(b, func(_ uint32, t []byte) {
			v := tlp.View(t)
			restart = restart || !s.done && v.Kind() == tlp.MWr && v.Address() == kitMemory+64*5
		})
		if restart {
			s.done = true
			return [][]byte{b, hb}
		}
		return [][]byte{b}
	}, nil)
	if _, err := runKit(t, su, "handshake", "ordering"); err != nil {
		t.Fatalf("kit: %v", err)
	}
}
