package driver_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/memlink"
	"github.com/dxpu/dxpu/bridge/seal"
)

// keyedConfig is testConfig with a pair key and, as daemons run,
// random session nonces (Seed 0).
func keyedConfig(role bridge.Role) bridge.Config {
	c := testConfig(role)
	c.Seed, c.RequireKeys = 0, true
	c.Key = make([]byte, seal.KeyLen)
	for i := range c.Key {
		c.Key[i] = byte(0x5a + i)
	}
	return c
}

// waitFor waits until cond holds, as long as the runners keep handling
// frames: it fails when none of them made progress for 5 s, or when frames
// keep flowing for a minute without cond holding (keepalives alone are
// no progress towards it).
func waitFor(t *testing.T, what string, cond func() bool, runners ...*driver.Runner) {
	t.Helper()
	limit := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(limit) {
			t.Fatalf("%s: frames flowed for a minute without it", what)
		}
		timeout := time.NewTimer(5 * time.Second)
		select {
		case <-runners[0].Progress:
		case <-runners[len(runners)-1].Progress:
		case <-timeout.C:
			t.Fatalf("%s: no progress for 5 s", what)
		}
		timeout.Stop()
	}
}

// startRunner runs a bridge on tr; the returned stop cancels it and
// returns once its Run has, so a successor on the same wire never races
// it for frames.
func startRunner(t *testing.T, cfg bridge.Config, tr driver.Transport, wg *sync.WaitGroup) (*driver.Runner, func()) {
	t.Helper()
	b, err := bridge.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := driver.New(b, tr)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	wg.Add(1)
	go func() { defer wg.Done(); defer close(done); _ = r.Run(ctx) }()
	return r, func() { cancel(); <-done }
}

// A keyed pair in real time over a lossy, duplicating, reordering
// transport that also passes corrupted frames on: every write delivered
// once and in order, the corrupted frames refused by the seal.
func TestKeyedRunnerDelivers(t *testing.T) {
	t.Parallel()
	a, b := newPipes()
	faults := memlink.Faults{Loss: 0.03, Duplicate: 0.02, Reorder: 0.02, Corrupt: 0.01, PassCorrupt: true, Delay: 20 * time.Microsecond}
	ht, gt := driver.NewFaulty(batchPipe{a}, faults, 1), driver.NewFaulty(batchPipe{b}, faults, 2)
	const n = 3000
	got, runners := runPairConfig(t, ht, gt, n, keyedConfig)
	if len(got) != n {
		t.Fatalf("delivered %d, want %d", len(got), n)
	}
	for i, w := range got {
		if w != uint64(i) {
			t.Fatalf("delivery %d is write %d", i, w)
		}
	}
	c := runners[1].Counters()
	if c.FramesOpened == 0 || c.DroppedForged+c.DroppedSealMalformed == 0 || c.LinkDowns != 0 {
		t.Fatalf("GPU side: opened %d, refused %d forged + %d malformed (1%% corrupted frames passed on), %d link downs",
			c.FramesOpened, c.DroppedForged, c.DroppedSealMalformed, c.LinkDowns)
	}
}

// A restarted keyed bridge comes back: the runner numbers its handshake
// frames by wall clock, so the peer, which saw the previous bridge's, lets
// the new one's in; the new session's keys are fresh.
func TestKeyedRunnerRestart(t *testing.T) {
	t.Parallel()
	a, b := newPipes()
	var wg sync.WaitGroup
	defer wg.Wait()
	g, stopG := startRunner(t, keyedConfig(bridge.RoleGPU), b, &wg)
	defer stopG()
	h, stopH := startRunner(t, keyedConfig(bridge.RoleHost), a, &wg)
	waitFor(t, "first link up", func() bool { return h.State() == bridge.StateUp && g.State() == bridge.StateUp }, h, g)
	stopH()
	// The same wire, a new bridge and runner: a restarted host-side process.
	a2 := &pipe{out: a.out, in: a.in, done: make(chan struct{})}
	h2, stopH2 := startRunner(t, keyedConfig(bridge.RoleHost), a2, &wg)
	defer stopH2()
	waitFor(t, "up again", func() bool {
		// At least a second link up: a restart met by the GPU side's own
		// dead-peer timeout may take it down and up once more.
		return h2.State() == bridge.StateUp && g.State() == bridge.StateUp && g.Counters().LinkUps >= 2
	}, h2, g)
	// Rekey and a key change through the runners, under traffic-free
	// keepalives: both sides end on the new generation.
	if err := h2.Rekey(); err != nil {
		t.Fatal(err)
	}
	newKey := make([]byte, seal.KeyLen)
	for _, r := range []*driver.Runner{h2, g} {
		if err := r.InstallKey(1, newKey); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.ActivateKey(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "key change", func() bool {
		hs, _ := h2.KeyState()
		gs, _ := g.KeyState()
		return hs.TxGeneration == 1 && gs.TxGeneration == 1 && hs.RxGeneration == 1 && gs.RxGeneration == 1
	}, h2, g)
	// Without the wall clock the new bridge's first HELLOs would number
	// below the old one's and be refused as replays.
	if c := g.Counters(); c.DroppedReplayed != 0 {
		t.Fatalf("GPU side refused %d frames of the restarted host side as replayed", c.DroppedReplayed)
	}
}
