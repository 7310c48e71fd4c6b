package chaos

import (
	"slices"
	"testing"
	"time"
)

func TestScheduleIsTheSeeds(t *testing.T) {
	tg := RunTargets()
	a, b := Schedule(1, 30*time.Second, tg), Schedule(1, 30*time.Second, tg)
	if !slices.Equal(a, b) {
		t.Fatalf("seed 1 gave two schedules:\n%v\n%v", a, b)
	}
	if c := Schedule(2, 30*time.Second, tg); slices.Equal(a, c) {
		t.Fatalf("seeds 1 and 2 gave the same schedule %v", a)
	}
}

func TestScheduleShape(t *testing.T) {
	tg := RunTargets()
	for seed := int64(0); seed < 50; seed++ {
		d := 30 * time.Second
		s := Schedule(seed, d, tg)
		kinds := map[string]bool{}
		var prevEnd time.Duration
		for i, f := range s {
			kinds[f.Kind] = true
			if f.At < 3*time.Second || f.At < prevEnd {
				t.Fatalf("seed %d fault %d %v starts during the warm-up or before fault %d is healed (%v)", seed, i, f, i-1, prevEnd)
			}
			if f.At+f.For > d-time.Second {
				t.Fatalf("seed %d fault %v ends in the last second of %v", seed, f, d)
			}
			prevEnd = f.At + f.For
			switch f.Kind {
			case FaultKill, FaultStop, FaultRestart:
				if !slices.Contains(tg.Daemons, f.Target) {
					t.Fatalf("seed %d: %v hits no daemon", seed, f)
				}
			case FaultLinkCut:
				if !slices.Contains(tg.Boxes, f.Target) || f.For <= 0 {
					t.Fatalf("seed %d: %v cuts no box's link for a while", seed, f)
				}
			case FaultRotateCredential:
				if !slices.Contains(tg.Agents, f.Target) {
					t.Fatalf("seed %d: %v rotates no agent's credential", seed, f)
				}
			case FaultAPIOutage:
				if !slices.Contains(tg.Hosts, f.Target) || f.For <= DefaultBounds.KeySplit || f.For <= DefaultBounds.PairUp {
					t.Fatalf("seed %d: %v takes no host's API out for longer than the bounds", seed, f)
				}
			case FaultRekeyStorm, FaultClientFlood:
				if f.Count <= 0 {
					t.Fatalf("seed %d: %v has no calls", seed, f)
				}
			}
		}
		// 30s visit at least three kinds: the first faults go through
		// every kind before any repeats (two long ones, a loss and an
		// API outage of up to 10s each, with the pauses after them, may
		// leave room for one more).
		if len(kinds) < 3 {
			t.Fatalf("seed %d: a 30s schedule has %d kinds: %v", seed, len(kinds), s)
		}
	}
	if s := Schedule(1, 3500*time.Millisecond, tg); len(s) != 0 {
		t.Fatalf("a 3.5s campaign has room for no fault after the warm-up, got %v", s)
	}
}
