package conform

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/tlp/encap"
)

// TestKeyedKitUnkeyedBridge: a keyed kit against an unkeyed bridge got
// its HELLOs, unsealed, dropped them all and after 10 s said "no frame
// ... is it running?". It fails KEY-2 instead, saying that frames arrived
// unsealed, within a second or so, and fails nothing else.
func TestKeyedKitUnkeyedBridge(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	rep, err := runKit(t, setup{opts: func(o *Options) {
		o.Keys = Keys{Key: testKey(1), Generation: 1, Mode: seal.ModeGCM}
	}})
	took := time.Since(t0)
	if err != nil {
		t.Fatalf("kit: %v, want a report failing KEY-2", err)
	}
	r, _ := rep.Result("KEY-2")
	if r.Verdict != Fail || !strings.Contains(r.Reason, "frames arrived but were not sealed") {
		t.Errorf("KEY-2: %s (%s), want fail: not sealed", r.Verdict, r.Reason)
	}
	if f := rep.Failed(); len(f) != 1 {
		t.Errorf("failed %v, want KEY-2 alone", f)
	}
	if took >= startWait {
		t.Errorf("took %v: the kit waited out its start wait", took)
	}
}

// TestNegativeTimersRefused: Timers (and Keys.GraceTime) take 0 for the
// default; a negative one was taken for the default too, silently.
func TestNegativeTimersRefused(t *testing.T) {
	t.Parallel()
	neg := -5 * time.Millisecond
	for name, set := range map[string]func(*Options){
		"HelloInterval":     func(o *Options) { o.Timers.HelloInterval = neg },
		"Keepalive":         func(o *Options) { o.Timers.Keepalive = neg },
		"DeadAfter":         func(o *Options) { o.Timers.DeadAfter = neg },
		"AckDelay":          func(o *Options) { o.Timers.AckDelay = neg },
		"MaxRTO":            func(o *Options) { o.Timers.MaxRTO = neg },
		"CompletionTimeout": func(o *Options) { o.Timers.CompletionTimeout = neg },
		"Slack":             func(o *Options) { o.Timers.Slack = neg },
		"grace time":        func(o *Options) { o.Keys = Keys{Key: testKey(1), GraceTime: neg} },
		"MTU":               func(o *Options) { o.MTU = -1 },
	} {
		o := Options{Peer: "udp:127.0.0.1:9", Local: "127.0.0.1:0", Role: encap.RoleGPU, PairID: 1}
		set(&o)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		_, err := Run(ctx, o)
		cancel()
		if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s negative: %v, want ErrOptions naming it", name, err)
		}
	}
}

// TestKeyedKitOtherKey: against a bridge sealing under another key the
// kit opens none of its frames either; it cannot tell a wrong key from a
// broken seal, so it ends the run saying what it saw (ErrMismatch), not
// that no frame came.
func TestKeyedKitOtherKey(t *testing.T) {
	t.Parallel()
	_, err := runKit(t, setup{
		config: func(c *bridge.Config) { c.Key, c.KeyGeneration = testKey(9), 1 },
		opts:   func(o *Options) { o.Keys = Keys{Key: testKey(1), Generation: 1} },
	})
	if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "none opened") || !strings.Contains(err.Error(), "--key-file") {
		t.Errorf("kit: %v, want ErrMismatch: frames came, none opened", err)
	}
}
