package conform

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/tlp/encap"
)

// newBridge builds the bridge under test from cfg as su changes it.
func newBridge(cfg bridge.Config, su setup) (*bridge.Bridge, error) {
	if su.config != nil {
		su.config(&cfg)
	}
	b, err := bridge.New(cfg)
	if err == nil && su.install != nil {
		err = su.install(b)
	}
	return b, err
}

// unkeyedNA: r is a keyed pair's rule, n/a on an unkeyed pair for that
// reason.
func unkeyedNA(r Result) bool {
	return slices.Contains(keyRules, r.Rule) && strings.Contains(r.Reason, "the pair is unkeyed")
}

func testKey(b byte) []byte {
	k := make([]byte, seal.KeyLen)
	for i := range k {
		k[i] = b + byte(i)
	}
	return k
}

// keyedTimers are iutTimers with a longer silence limit and slack: the
// keyed scenario waits on answers to frames the IUT drops, and a loaded
// machine must neither end the session meanwhile nor starve the in-process
// bridge past the kit's wait for an answer.
var keyedTimers = func() Timers {
	t := iutTimers
	t.DeadAfter = time.Second
	t.Slack = max(t.Slack, 100*time.Millisecond)
	return t
}()

// keyedSetup is a keyed pair: the bridge holds generation 1 and has 2
// installed; the kit is told both. rekeyAfter is the bridge's.
func keyedSetup(mode seal.Mode, rekeyAfter uint64) setup {
	return setup{controlled: true,
		config: func(c *bridge.Config) {
			c.Key, c.KeyGeneration, c.SealMode, c.RekeyAfter = testKey(1), 1, mode, rekeyAfter
			c.RekeyGraceTime = 50 * time.Millisecond
		},
		install: func(b *bridge.Bridge) error { return b.InstallKey(2, testKey(2)) },
		bridge:  &keyedTimers,
		opts: func(o *Options) {
			o.Timers = keyedTimers
			o.Keys = Keys{Key: testKey(1), Generation: 1, Mode: mode, NextKey: testKey(2), NextGeneration: 2,
				RekeyAfter: rekeyAfter, GraceTime: 50 * time.Millisecond}
		}}
}

func keyVerdicts(t *testing.T, rep Report) map[string]Verdict {
	t.Helper()
	v := map[string]Verdict{}
	for _, id := range append([]string{"KEY-1"}, keyRules...) {
		r, _ := rep.Result(id)
		v[id] = r.Verdict
	}
	return v
}

// TestKeyedAgainstBridge: the kit, keyed, against dxpu's keyed bridge in
// both modes passes every KEY rule (KEY-1 is n/a: for unkeyed pairs) and
// fails none.
func TestKeyedAgainstBridge(t *testing.T) {
	for _, mode := range []seal.Mode{seal.ModeGCM, seal.ModeGMAC} {
		t.Run(mode.String(), func(t *testing.T) {
			// The unkeyed run's timers (TestBridgeConforms): every
			// scenario runs, and the longer waits of keyedTimers would
			// only stretch it.
			su := keyedSetup(mode, 16)
			su.bridge = nil
			opts := su.opts
			su.opts = func(o *Options) { opts(o); o.Timers = iutTimers }
			// GMAC differs in the seal alone: the keyed scenario
			// covers it, without a second run of every real-time bound.
			var scen []string
			if mode == seal.ModeGMAC {
				scen = []string{"handshake", "keys"}
			}
			rep := runConforming(t, su, scen...)
			for _, f := range rep.Failed() {
				t.Errorf("%s failed: %s", f.Rule, f.Reason)
			}
			for id, v := range keyVerdicts(t, rep) {
				want := Pass
				if id == "KEY-1" {
					want = NA
				}
				if v != want {
					r, _ := rep.Result(id)
					t.Errorf("%s: %s (%s), want %s", id, v, r.Reason, want)
				}
			}
		})
	}
}

// TestKeyedShim: the test-only keyed peer without faults passes every KEY
// rule the kit can judge of it (KEY-8 needs a next key it does not hold),
// so that the faults below are what fails.
func TestKeyedShim(t *testing.T) {
	rep := runAgainst(t, shimSetup(shimFaults{}), "handshake", "keys")
	for _, id := range []string{"KEY-2", "KEY-3", "KEY-4", "KEY-5", "KEY-6", "KEY-7"} {
		if r, _ := rep.Result(id); r.Verdict != Pass {
			t.Errorf("%s: %s (%s), want pass", id, r.Verdict, r.Reason)
		}
	}
}

// TestKeyedNegative: each KEY rule fails, naming itself, against a peer
// broken in that rule alone.
func TestKeyedNegative(t *testing.T) {
	cases := []struct {
		name  string
		su    setup
		scen  []string
		fails []string
		why   string
		also  []string // may fail too, as a consequence
	}{
		{"unsealed frames sent", shimSetup(shimFaults{plainKeepalive: true}), []string{"handshake", "keys"}, []string{"KEY-2"}, "KEEPALIVE frame not sealed", nil},
		{"unsealed frames taken", shimSetup(shimFaults{acceptPlain: true}), []string{"handshake", "keys"}, []string{"KEY-3"}, "unsealed KEEPALIVE", nil},
		{"no replay window", shimSetup(shimFaults{noReplay: true}), []string{"handshake", "keys"}, []string{"KEY-3", "KEY-5", "KEY-7"}, "behind the newest",
			// The replayed HELLO of an earlier kit session binds the shim
			// to that session's keys; the kit's next frame binds it back
			// to the current ones with its packet numbers from 0 again,
			// which the kit sees repeated when the shim sends in between
			// (a whole stress's race pass): the nonce reuse a replay
			// window prevents.
			[]string{"KEY-2"}},
		{"key nonce reused", shimSetup(shimFaults{fixedNonce: true}), []string{"handshake", "keys"}, []string{"KEY-4"}, "key nonces must be random", nil},
		{"HELLO-ACK under session keys", shimSetup(shimFaults{hsUnderSession: true}), []string{"handshake", "keys"}, []string{"KEY-5"}, "under the session keys",
			// The kit reads key nonces from HELLO-ACKs it can open.
			[]string{"KEY-4"}},
		{"never rekeys", func() setup {
			su := keyedSetup(seal.ModeGCM, 0)
			o := su.opts
			su.opts = func(x *Options) { o(x); x.Keys.RekeyAfter = 8 }
			return su
		}(), []string{"keys"}, []string{"KEY-6"}, "more than 2 x RekeyAfter (8)", nil},
		{"previous key retired at once", func() setup {
			su := keyedSetup(seal.ModeGCM, 16)
			c := su.config
			su.config = func(x *bridge.Config) { c(x); x.RekeyGrace, x.RekeyGraceTime = 1, time.Microsecond }
			return su
		}(), []string{"keys"}, []string{"KEY-7"}, "was not answered", nil},
		{"previous key kept", func() setup {
			su := keyedSetup(seal.ModeGCM, 0)
			c := su.config
			su.config = func(x *bridge.Config) { c(x); x.RekeyGraceTime = time.Minute }
			return su
		}(), []string{"keys"}, []string{"KEY-7"}, "its echo still shows", nil},
		{"next key not installed", func() setup {
			su := keyedSetup(seal.ModeGCM, 16)
			su.install = nil
			return su
		}(), []string{"keys"}, []string{"KEY-8"}, "installed generation 2 was not answered", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := runKit(t, tc.su, tc.scen...)
			if err != nil {
				t.Fatalf("kit: %v", err)
			}
			for _, id := range tc.fails {
				r, _ := rep.Result(id)
				if r.Verdict != Fail {
					t.Errorf("%s: %s (%s), want fail", id, r.Verdict, r.Reason)
				}
			}
			if r, _ := rep.Result(tc.fails[0]); !strings.Contains(r.Reason, tc.why) {
				t.Errorf("%s: %q, want it to say %q", r.Rule, r.Reason, tc.why)
			}
			for _, f := range rep.Failed() {
				if !slices.Contains(tc.fails, f.Rule) && !slices.Contains(tc.also, f.Rule) && strings.HasPrefix(f.Rule, "KEY-") {
					t.Errorf("%s failed too: %s", f.Rule, f.Reason)
				}
			}
		})
	}
}

// An LNK-1 silence names the frames that came in it but did not open, so
// a quiet IUT reads apart from one the kit could not read.
func TestSilenceNamesUnopenedFrames(t *testing.T) {
	t.Parallel()
	led := newLedger()
	e := newEnd(led, encap.RoleHost, 42, true, Timers{}.withDefaults(), 1)
	e.keys = newKeyed(Keys{Key: make([]byte, seal.KeyLen)}.withDefaults(), 42, encap.RoleHost, time.Now())
	e.iutUp, e.lastFrame, e.lastKind = true, time.Millisecond, "KEEPALIVE"
	plain := make([]byte, encap.HeaderLen) // a bare ACK, unsealed: KEY-2 drops it
	h := encap.Header(plain)
	h.SetVersionFlags(encap.Version, 0)
	h.SetType(encap.MsgAck)
	h.SetPairID(42)
	e.input(2*time.Millisecond, plain)
	if e.unopened != 1 || !strings.Contains(e.unopenedWhy, "unsealed") {
		t.Fatalf("unopened %d (%q), want 1 unsealed", e.unopened, e.unopenedWhy)
	}
	e.observe(time.Second, plain) // as if the next frame opened, a second on
	r := led.get("LNK-1")
	if !led.failed("LNK-1") || !strings.Contains(r.Reason, "1 frame came in the gap that the kit did not open (the latest: unsealed ACK frame)") {
		t.Fatalf("LNK-1: %+v", r)
	}
	if e.unopened != 0 {
		t.Fatalf("unopened %d after a frame opened, want 0", e.unopened)
	}
}

// An unanswered KEEPALIVE probe's failure says what the IUT did meanwhile:
// the frames the kit opened, the last of them, a session restart, and the
// frames it could not open.
func TestProbeMissSaysWhatTheIUTDid(t *testing.T) {
	t.Parallel()
	e := newEnd(newLedger(), encap.RoleHost, 42, true, Timers{}.withDefaults(), 1)
	k := &kit{end: e, start: time.Now().Add(-time.Second)}
	e.frames, e.restarts, e.lastKind, e.lastFrame = 5, 1, "HELLO", k.now()
	e.unopened, e.unopenedWhy = 2, "unknown key epoch"
	got := k.missNote(3, k.now()-500*time.Millisecond, 2, 0)
	for _, want := range []string{"probe 3: ", "ms waited", "the IUT sent 3 frames the kit opened, the last a HELLO",
		"restarted its session 1 times", "2 frames came in the gap that the kit did not open (the latest: unknown key epoch)"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
}
