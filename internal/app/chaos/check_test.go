package chaos

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

var testBounds = Bounds{PairUp: 3 * time.Second, KeySplit: 2 * time.Second, Converge: 5 * time.Second}

// world is one observation of a small system: allocation a-1 lends
// box1-gpu0 to host1 over pair 7.
type world struct {
	managerUp          bool
	state, degraded    string
	hostLink, boxLink  string
	hostGen, boxGen    uint32
	switchVer          uint64
	unhealthy          []string
	boot0              string
	hostDown, boxEmpty bool
	offHost            string // the GPU is not on the host: how it left
	// The keys' fingerprints, "k<generation>" if empty; the keys the host
	// refused, and why.
	hostFP, boxFP string
	hostRefused   uint64
	refusal       string
}

func fp(set string, gen uint32) string {
	if set != "" {
		return set
	}
	return fmt.Sprintf("k%d", gen)
}

func healthy() world {
	return world{managerUp: true, state: "active", hostLink: "up", boxLink: "up", hostGen: 3, boxGen: 3, switchVer: 5, boot0: "0x180000a1"}
}

func (w world) obs() *Obs {
	o := &Obs{ManagerUp: w.managerUp, TableVersion: 5, SwitchUp: true, SwitchTable: w.switchVer, Unhealthy: w.unhealthy,
		Agents: map[string][]PairObs{"host2": {}, "box2": {}}}
	if w.managerUp {
		o.Allocations = []AllocObs{{ID: "a-1", Host: "host1", State: w.state, Degraded: w.degraded,
			GPUs: []Assign{{Pair: 7, GPU: "box1-gpu0", Box: "box1"}}}}
	}
	if !w.hostDown {
		o.Agents["host1"] = []PairObs{{ID: 7, Allocation: "a-1", Link: w.hostLink, Gen: w.hostGen, KeyFP: fp(w.hostFP, w.hostGen),
			KeysRefused: w.hostRefused, KeyRefusal: w.refusal, Present: true, Vendor: "0x10de", Boot0: w.boot0}}
		if w.offHost != "" {
			o.Agents["host1"][0].Present, o.Agents["host1"][0].Removed = false, w.offHost
		}
	}
	o.Agents["box1"] = []PairObs{{ID: 7, Allocation: "a-1", Link: w.boxLink, Gen: w.boxGen, KeyFP: fp(w.boxFP, w.boxGen)}}
	if w.boxEmpty {
		o.Agents["box1"] = []PairObs{}
	}
	return o
}

// history observes every 200ms for d; at(t) says what the world is at t.
// One fault, healed at 2s (the nemesis's end unless said otherwise).
func history(d time.Duration, at func(t time.Duration) world) []Event {
	h := []Event{{T: time.Second, Kind: EvFault, Name: FaultKill, Subject: "box1"}, {T: 2 * time.Second, Kind: EvHeal, Name: FaultKill, Subject: "box1"}}
	for t := time.Duration(0); t <= d; t += 200 * time.Millisecond {
		h = append(h, Event{T: t, Kind: EvObs, Obs: at(t).obs()})
	}
	return h
}

func kinds(vs []Violation) string {
	var k []string
	for _, v := range vs {
		k = append(k, v.Kind+" "+v.Subject)
	}
	return strings.Join(k, ", ")
}

func requireOnly(t *testing.T, res Result, want ...string) {
	t.Helper()
	if got := kinds(res.Violations); got != strings.Join(want, ", ") {
		for _, v := range res.Violations {
			t.Logf("%s %s at %v: %s\n  %s", v.Kind, v.Subject, v.At, v.Message, strings.Join(v.Excerpt, "\n  "))
		}
		t.Fatalf("violations %q, want %q", got, strings.Join(want, ", "))
	}
}

func TestCheckCleanHistory(t *testing.T) {
	res := Check(history(10*time.Second, func(t time.Duration) world {
		w := healthy()
		if t >= time.Second && t < 2400*time.Millisecond { // the fault, briefly
			w.boxLink = "down"
		}
		return w
	}), 2*time.Second, testBounds)
	requireOnly(t, res)
	if !res.Converged || res.WorstConverge != 400*time.Millisecond {
		t.Fatalf("converged %v after %v, want true after 400ms", res.Converged, res.WorstConverge)
	}
}

func TestCheckSplitKeyGeneration(t *testing.T) {
	res := Check(history(10*time.Second, func(t time.Duration) world {
		w := healthy()
		if t >= time.Second { // the box restarted with a fresh key; the host kept the old until 5s
			w.boxGen = 4
		}
		if t >= 5*time.Second {
			w.hostGen = 4
		}
		return w
	}), 2*time.Second, testBounds)
	requireOnly(t, res, VSplitKey+" pair 7")
	v := res.Violations[0]
	if !strings.Contains(v.Message, "host1 runs key generation 3, box1 4") || v.At != 3200*time.Millisecond {
		t.Fatalf("split reported as %q at %v", v.Message, v.At)
	}
	if len(v.Excerpt) == 0 || !strings.Contains(strings.Join(v.Excerpt, "\n"), "heal  kill box1") {
		t.Fatalf("excerpt without the fault: %q", v.Excerpt)
	}
	// A split that starts long after the fault still names it.
	res = Check(history(14*time.Second, func(t time.Duration) world {
		w := healthy()
		if t >= 7*time.Second {
			w.boxGen = 4
		}
		if t >= 11*time.Second {
			w.hostGen = 4
		}
		return w
	}), 2*time.Second, testBounds)
	requireOnly(t, res, VSplitKey+" pair 7")
	if ex := strings.Join(res.Violations[0].Excerpt, "\n"); !strings.Contains(ex, "fault kill box1") || !strings.Contains(ex, "heal  kill box1") {
		t.Fatalf("excerpt without the fault before it: %q", ex)
	}
	// Within the bound it is a rekey in flight, not a violation.
	requireOnly(t, Check(history(10*time.Second, func(t time.Duration) world {
		w := healthy()
		if t >= time.Second {
			w.boxGen = 4
		}
		if t >= 2800*time.Millisecond {
			w.hostGen = 4
		}
		return w
	}), 2*time.Second, testBounds))
}

// TestCheckKeyGenerations (issue 20, finding 2): a pair's generations
// strictly increase and each names one key. A refused key, one generation
// under two keys and a generation that goes back are each flagged once; a
// rekey (a new generation, a new key, at both ends) is not.
func TestCheckKeyGenerations(t *testing.T) {
	rekeyed := func(t time.Duration) world {
		w := healthy()
		if t >= 4*time.Second { // a rekey: both ends move to 4, a new key
			w.hostGen, w.boxGen = 4, 4
		}
		return w
	}
	requireOnly(t, Check(history(10*time.Second, rekeyed), 2*time.Second, testBounds))

	// The manager reissued generation 4 after a restart: the host refused
	// it and kept 4 (no split: both ends still agree).
	res := Check(history(10*time.Second, func(t time.Duration) world {
		w := rekeyed(t)
		if t >= 6*time.Second {
			w.hostRefused, w.refusal = 1, "key generation 4: seal: generation 4 is not newer than 4"
		}
		if t >= 8*time.Second { // and then another, once more
			w.hostRefused = 2
		}
		return w
	}), 2*time.Second, testBounds)
	requireOnly(t, res, VKeyGeneration+" pair 7")
	if v := res.Violations[0]; v.At != 6*time.Second || !strings.Contains(v.Message, "host1 refused 1 key(s) for pair 7 of a-1") ||
		!strings.Contains(v.Message, "not newer than 4") {
		t.Fatalf("refusal reported at %v as %q", v.At, v.Message)
	}
	// A restarted agent counts from 0 again: only what it refuses then.
	res = Check(history(10*time.Second, func(t time.Duration) world {
		w := rekeyed(t)
		switch {
		case t >= 3*time.Second && t < 5*time.Second:
			w.hostRefused = 1
		case t >= 7*time.Second:
			w.hostRefused = 1 // restarted at 5s, refused again at 7s: still one report (once per agent and pair)
		}
		return w
	}), 2*time.Second, testBounds)
	requireOnly(t, res, VKeyGeneration+" pair 7")

	// Generation 4 under two keys: the box restarted and was given 4 again
	// with another key. Both ends report 4, so the split check is blind.
	res = Check(history(10*time.Second, func(t time.Duration) world {
		w := rekeyed(t)
		if t >= 6*time.Second {
			w.boxFP = "other"
			w.boxLink = "down"
			w.state, w.degraded = "degraded", "link down"
		}
		return w
	}), 2*time.Second, testBounds)
	requireOnly(t, res, VKeyGeneration+" pair 7")
	if v := res.Violations[0]; !strings.Contains(v.Message, "key generation 4 of pair 7 names two keys: box1 ran key k4 at 4.00s, box1 runs key other") {
		t.Fatalf("two keys reported as %q", v.Message)
	}

	// The host went back from 4 to 3 (briefly: no split past the bound).
	res = Check(history(10*time.Second, func(t time.Duration) world {
		w := rekeyed(t)
		if t >= 6*time.Second && t < 7*time.Second {
			w.hostGen, w.hostFP = 3, "older"
		}
		if t >= 7*time.Second {
			w.hostGen, w.boxGen, w.hostFP, w.boxFP = 5, 5, "k5", "k5"
		}
		return w
	}), 2*time.Second, testBounds)
	requireOnly(t, res, VKeyGeneration+" pair 7", VKeyGeneration+" pair 7")
	if a, b := res.Violations[0].Message, res.Violations[1].Message; !strings.Contains(a, "host1 runs pair 7 of a-1 under key generation 3 after 4") ||
		!strings.Contains(b, "key generation 3 of pair 7 names two keys") {
		t.Fatalf("a generation back reported as %q, %q", a, b)
	}
}

func TestCheckPairDownWithoutDegraded(t *testing.T) {
	down := func(degrade bool) func(time.Duration) world {
		return func(t time.Duration) world {
			w := healthy()
			if t >= time.Second && t < 6*time.Second {
				w.boxLink = "down"
				if degrade && t >= 3*time.Second {
					w.state, w.degraded = "degraded", "box box1: peer silent for 1s"
				}
			}
			return w
		}
	}
	res := Check(history(10*time.Second, down(false)), 2*time.Second, testBounds)
	requireOnly(t, res, VPairDown+" pair 7")
	if v := res.Violations[0]; !strings.Contains(v.Message, "down for 3.2s") || !strings.Contains(strings.Join(v.Excerpt, "\n"), "box1 link=down") {
		t.Fatalf("pair down reported as %q, excerpt %q", v.Message, v.Excerpt)
	}
	// Degraded with a reason within the bound: as it should be.
	requireOnly(t, Check(history(10*time.Second, down(true)), 2*time.Second, testBounds))
	// The manager down in the middle: it could not report, the episode
	// starts again when it answers.
	requireOnly(t, Check(history(10*time.Second, func(t time.Duration) world {
		w := down(false)(t)
		if t >= 3*time.Second && t < 4*time.Second {
			w.managerUp = false
		}
		return w
	}), 2*time.Second, testBounds))
}

// TestCheckGPUOffHost: a host's agent surprise-removes a pair's GPU when
// its link goes down (a silence of --dead-after) and plugs it back when the
// link is up again. That is the pair down for a while, held to the same
// bound: a GPU the link's return did not bring back, while the manager
// answers active, is a pair down past it; within the bound it is not; and
// the system has not converged while a GPU is off its host.
func TestCheckGPUOffHost(t *testing.T) {
	const how = "surprise (link down: peer silent for 1.0s)"
	res := Check(history(10*time.Second, func(t time.Duration) world {
		w := healthy()
		switch {
		case t >= time.Second && t < 2*time.Second: // a second of silence
			w.hostLink, w.offHost = "down", how
		case t >= 2*time.Second && t < 6*time.Second: // the link back, the GPU not
			w.offHost = how
		}
		return w
	}), 2*time.Second, testBounds)
	requireOnly(t, res, VPairDown+" pair 7")
	v := res.Violations[0]
	if !strings.Contains(v.Message, "pair 7 of a-1 up but its GPU off host1 for 3.2s") ||
		!strings.Contains(strings.Join(v.Excerpt, "\n"), "host1 link=up gen=3 gpu off the host: "+how) {
		t.Fatalf("a GPU left off its host reported as %q, excerpt %q", v.Message, v.Excerpt)
	}
	// Back within the bound: a link that went down and came back.
	requireOnly(t, Check(history(10*time.Second, func(t time.Duration) world {
		w := healthy()
		if t >= time.Second && t < 3*time.Second {
			w.offHost = how
		}
		return w
	}), 2*time.Second, testBounds))
	// Never back: the system never converged either.
	res = Check(history(10*time.Second, func(t time.Duration) world {
		w := healthy()
		if t >= time.Second {
			w.offHost, w.state, w.degraded = how, "degraded", "link down"
		}
		return w
	}), 2*time.Second, testBounds)
	requireOnly(t, res, VNotConverged+" system")
}

func TestCheckHealthyGPURemoved(t *testing.T) {
	res := Check(history(10*time.Second, func(t time.Duration) world {
		w := healthy()
		if t >= 1400*time.Millisecond && t < 4*time.Second {
			w.unhealthy = []string{"box1-gpu0"}
		}
		return w
	}), 2*time.Second, testBounds)
	requireOnly(t, res, VHealthyGPURemove+" box1-gpu0") // once, though seen in many observations
	if res.Violations[0].At != 1400*time.Millisecond {
		t.Fatalf("found at %v, want 1.4s", res.Violations[0].At)
	}
}

func TestCheckNotConverged(t *testing.T) {
	res := Check(history(10*time.Second, func(t time.Duration) world {
		w := healthy()
		if t >= time.Second {
			w.switchVer = 4 // the switch stopped following the table
		}
		return w
	}), 2*time.Second, testBounds)
	requireOnly(t, res, VNotConverged+" system")
	if v := res.Violations[0]; !strings.Contains(v.Message, "switch table version 4, manager's 5") || res.Converged {
		t.Fatalf("non-convergence reported as %q (converged %v)", v.Message, res.Converged)
	}
	// The agents' pairs must be the journal's too: the box lost pair 7.
	res = Check(history(10*time.Second, func(t time.Duration) world {
		w := healthy()
		w.boxEmpty = t >= time.Second
		return w
	}), 2*time.Second, Bounds{PairUp: time.Hour, KeySplit: time.Hour, Converge: 5 * time.Second})
	requireOnly(t, res, VNotConverged+" system")
	if v := res.Violations[0]; !strings.Contains(v.Message, "box1 runs pairs [], the manager's journal has [7] there") {
		t.Fatalf("non-convergence reported as %q", v.Message)
	}
	// Converging, but past the bound.
	res = Check(history(10*time.Second, func(t time.Duration) world {
		w := healthy()
		if t >= time.Second && t < 8*time.Second {
			w.switchVer = 4
		}
		return w
	}), 2*time.Second, testBounds)
	requireOnly(t, res, VNotConverged+" system")
	if !res.Converged || res.WorstConverge != 6*time.Second {
		t.Fatalf("converged %v after %v, want true after 6s", res.Converged, res.WorstConverge)
	}
}

func TestCheckDataCorruption(t *testing.T) {
	res := Check(history(6*time.Second, func(t time.Duration) world {
		w := healthy()
		if t >= 3*time.Second {
			w.boot0 = "0xdeadbeef"
		}
		return w
	}), 2*time.Second, testBounds)
	requireOnly(t, res, VDataCorruption+" pair 7")
	if v := res.Violations[0]; !strings.Contains(v.Message, "PMC_BOOT_0 0xdeadbeef, other GPUs read 0x180000a1") {
		t.Fatalf("corruption reported as %q", v.Message)
	}
}

func TestCheckCopyCorruption(t *testing.T) {
	h := history(4*time.Second, func(time.Duration) world { return healthy() })
	h = append(h, Event{T: 2500 * time.Millisecond, Kind: EvOp, Name: "copy", Subject: "a-1 pair 7"},
		Event{T: 2600 * time.Millisecond, Kind: EvOp, Name: "copy", Subject: "a-1 pair 7", Err: "502 Bad Gateway: pair 7: read: no completion"},
		Event{T: 3 * time.Second, Kind: EvOp, Name: "copy", Subject: "a-1 pair 7", Err: corruptPrefix + " wrote 1024 bytes sha256 ab, read back 1024 bytes sha256 cd"})
	res := Check(h, 2*time.Second, testBounds)
	requireOnly(t, res, VDataCorruption+" a-1 pair 7") // a failed copy is no corruption; other bytes back are
	if ex := strings.Join(res.Violations[0].Excerpt, "\n"); !strings.Contains(ex, "sha256 cd") || !strings.Contains(ex, "no completion") {
		t.Fatalf("excerpt %q", ex)
	}
}

func TestSummarize(t *testing.T) {
	h := history(time.Second, func(time.Duration) world { return healthy() })
	h = append(h, Event{Kind: EvOp, Name: "alloc"}, Event{Kind: EvOp, Name: "alloc", Err: "busy"}, Event{Kind: EvOp, Name: "rekey"})
	r := Summarize(h, nil, Result{})
	if r.Operations != 3 || r.OperationsFailed != 1 || !reflect.DeepEqual(r.OperationsByName["alloc"], OpCount{OK: 1, Failed: 1, Errors: []string{"busy"}}) ||
		r.Faults != 1 || r.FaultsByKind[FaultKill] != 1 || r.Observations != 6 {
		t.Fatalf("summary %+v", fmt.Sprint(r.Operations, r.OperationsFailed, r.OperationsByName, r.Faults, r.FaultsByKind, r.Observations))
	}
}

// TestCheckHostBounds: a host's own bounds (a VM host's) apply to its pairs
// and to no other host's, and widen the system's convergence bound.
func TestCheckHostBounds(t *testing.T) {
	down := history(10*time.Second, func(t time.Duration) world {
		w := healthy()
		if t >= time.Second && t < 6*time.Second {
			w.boxLink = "down"
		}
		return w
	})
	wide := Bounds{PairUp: 8 * time.Second, KeySplit: 8 * time.Second, Converge: 9 * time.Second}
	// a-1 is host1's: host2's bounds do not cover it.
	requireOnly(t, CheckHosts(down, 2*time.Second, testBounds, map[string]Bounds{"host2": wide}), VPairDown+" pair 7")
	res := CheckHosts(down, 2*time.Second, testBounds, map[string]Bounds{"host1": wide})
	requireOnly(t, res)
	// Converged 6s after the nemesis stopped: past 5s, within the host's
	// 9s.
	late := history(10*time.Second, func(t time.Duration) world {
		w := healthy()
		if t < 8*time.Second {
			w.switchVer = 4
		}
		return w
	})
	requireOnly(t, Check(late, 2*time.Second, testBounds), VNotConverged+" system")
	requireOnly(t, CheckHosts(late, 2*time.Second, testBounds, map[string]Bounds{"host2": wide}))
}
