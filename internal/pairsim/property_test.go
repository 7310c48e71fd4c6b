package pairsim

import (
	"flag"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/memlink"
)

var (
	seeds     = flag.Int("seeds", 0, "property test: number of seeded runs (default 3000, 300 with -short)")
	firstSeed = flag.Uint64("seed", 1, "property test: first seed (rerun a failure with -seed N -seeds 1)")
)

func seedCount() int {
	if *seeds > 0 {
		return *seeds
	}
	if testing.Short() {
		return 300
	}
	return 3000
}

// randomScenario draws faults, buffer sizes and flaps from the seed.
func randomScenario(seed uint64) Scenario {
	r := rand.New(rand.NewPCG(seed, 42))
	pick := func(v ...float64) float64 { return v[r.IntN(len(v))] }
	f := memlink.Faults{
		Loss:      pick(0, 0, 0.001, 0.01, 0.05, 0.1, 0.2) * r.Float64() * 2,
		Duplicate: pick(0, 0, 0.01, 0.05, 0.1),
		Reorder:   pick(0, 0, 0.01, 0.05, 0.2),
		Corrupt:   pick(0, 0, 0.01, 0.05),
		Delay:     time.Duration(pick(0.5, 2, 5, 20) * float64(time.Microsecond)),
		Bandwidth: pick(0, 10e9, 100e9),
	}
	f.Loss = min(f.Loss, 0.2)
	cfg := func() bridge.Config {
		c := bridge.Config{
			Window:     []int{8, 32, 256}[r.IntN(3)],
			MaxPayload: 512,
			MTU:        []int{600, 1472, 9000}[r.IntN(3)],
			TagBits:    []int{8, 10}[r.IntN(2)],
			TxQueue:    []int{4, 64}[r.IntN(2)],
		}
		for i := range c.Credits {
			switch r.IntN(3) {
			case 0:
				c.Credits[i] = bridge.ClassCredits{Headers: 2 + r.IntN(8), Data: 32 + r.IntN(64)}
			case 1:
				c.Credits[i] = bridge.ClassCredits{} // default
			}
		}
		if r.IntN(3) == 0 { // completions infinite, as endpoints advertise
			c.Credits[2] = bridge.ClassCredits{Headers: 0, Data: 0}
			c.InfiniteQueue = 16
		}
		return c
	}
	sc := Scenario{
		Seed:     seed,
		Faults:   f,
		Host:     cfg(),
		GPU:      cfg(),
		Count:    150 + r.IntN(150),
		Interval: time.Duration(200+r.IntN(2000)) * time.Nanosecond,
	}
	switch r.IntN(7) {
	case 2: // one direction only, long: one side declares the link down
		sc.Flaps = []Flap{{At: time.Duration(10+r.IntN(200)) * time.Microsecond, For: 12*time.Millisecond + time.Duration(r.IntN(10))*time.Millisecond, OneWay: 1 + r.IntN(2)}}
	case 0: // short flap: resumes without loss
		sc.Flaps = []Flap{{At: time.Duration(10+r.IntN(40)) * time.Microsecond, For: time.Duration(100+r.IntN(3000)) * time.Microsecond}}
	case 1: // long flap: link down, explicit reset
		sc.Flaps = []Flap{{At: time.Duration(10+r.IntN(200)) * time.Microsecond, For: 15*time.Millisecond + time.Duration(r.IntN(20))*time.Millisecond}}
	}
	return sc
}

// TestPropertySeeded: with 0-20% loss, duplication, reordering, corruption
// and link flaps, every posted write arrives exactly once and in order (or,
// after a link down only, is reported lost), every request gets exactly one
// final completion, and every run finishes.
func TestPropertySeeded(t *testing.T) {
	n := seedCount()
	flaps, downs, lossy := 0, 0, 0
	for i := 0; i < n; i++ {
		seed := *firstSeed + uint64(i)
		sc := randomScenario(seed)
		sc.CheckInvariants = i%10 == 0
		t0 := time.Now()
		r := sc.Run()
		if d := time.Since(t0); d > 500*time.Millisecond {
			t.Logf("seed %d took %v (virtual %v, flaps %v): %v", seed, d, r.End, sc.Flaps, r)
		}
		if len(r.Violations) > 0 {
			t.Fatalf("seed %d (faults %+v flaps %v): %v", seed, sc.Faults, sc.Flaps, r)
		}
		if len(sc.Flaps) > 0 {
			flaps++
		}
		if sc.Faults.Loss > 0 {
			lossy++
		}
		downs += r.LinkDowns
		// Short flaps must resume without a link down.
		if len(sc.Flaps) == 1 && sc.Flaps[0].For < 5*time.Millisecond && r.LinkDowns > 0 {
			t.Fatalf("seed %d: a %v flap took the link down: %v", seed, sc.Flaps[0].For, r)
		}
	}
	t.Logf("%d runs: %d lossy, %d with flaps, %d link-down events", n, lossy, flaps, downs)
}
