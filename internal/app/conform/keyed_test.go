package conform

import (
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/seal"
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

func testKey(b byte) []byte {
	k := make([]byte, seal.KeyLen)
	for i := range k {
		k[i] = b + byte(i)
	}
	return k
}

// keyedSetup is a keyed pair: the bridge holds generation 1 and has 2
// installed; the kit is told both. rekeyAfter is the bridge's.
func keyedSetup(mode seal.Mode, rekeyAfter uint64) setup {
	return setup{controlled: true,
		config: func(c *bridge.Config) {
			c.Key, c.KeyGeneration, c.SealMode, c.RekeyAfter = testKey(1), 1, mode, rekeyAfter
			c.RekeyGraceTime = 50 * time.Millisecond
		},
		install: func(b *bridge.Bridge) error { return b.InstallKey(2, testKey(2)) },
		opts: func(o *Options) {
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
			rep := runAgainst(t, keyedSetup(mode, 16))
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
