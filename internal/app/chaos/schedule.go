package chaos

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/dxpu/dxpu/internal/app/units"
)

// Fault kinds.
const (
	FaultKill             = "kill"              // SIGKILL, restarted after For
	FaultStop             = "stop"              // SIGSTOP, SIGCONT after For
	FaultRestart          = "restart"           // SIGTERM, started again at once
	FaultRekeyStorm       = "rekey_storm"       // Count concurrent rekeys
	FaultRotateCredential = "rotate_credential" // re-register, new credential, SIGHUP
	FaultClientFlood      = "client_flood"      // Count concurrent client calls
	FaultLinkCut          = "link_cut"          // the box's cable dropped for For
	FaultLoss             = "loss"              // the box's cable loses LossPercent of its frames for For
	// FaultAPIOutage: a host agent's credential file replaced and SIGHUP
	// (no re-registration), so its API refuses the manager for For while
	// its data plane runs; its allocations are rekeyed meanwhile (issue
	// 20, finding 3: a one-phase rekey then splits the pair's key).
	FaultAPIOutage = "api_outage"
)

// APIOutageMin and APIOutageMax bound an api_outage: longer than
// DefaultBounds.KeySplit and PairUp, so that a rekey that splits the
// pair's key or takes its link down for the outage is flagged.
const (
	APIOutageMin = 7 * time.Second
	APIOutageMax = 10 * time.Second
)

// LossPercent is the share of frames a box's cable loses during a loss
// fault: the 1% of a bad optic or a congested switch port, which the
// bridges' retransmission must hide (no pair goes down, no copy differs).
const LossPercent = 1

// Kinds lists every fault kind, in the order a schedule first visits them.
var Kinds = []string{FaultKill, FaultStop, FaultRestart, FaultRekeyStorm, FaultRotateCredential, FaultClientFlood, FaultLinkCut, FaultLoss, FaultAPIOutage}

// Fault is one step of the nemesis.
type Fault struct {
	At     time.Duration // since the campaign started
	Kind   string
	Target string        // a daemon, agent or box; empty for storms and floods
	For    time.Duration // how long the fault lasts before it is healed
	Count  int           // rekeys of a storm, calls of a flood
}

// MarshalJSON writes the durations in milliseconds.
func (f Fault) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		AtMS   int64  `json:"at_ms"`
		Kind   string `json:"kind"`
		Target string `json:"target,omitempty"`
		ForMS  int64  `json:"for_ms,omitempty"`
		Count  int    `json:"count,omitempty"`
	}{f.At.Milliseconds(), f.Kind, f.Target, f.For.Milliseconds(), f.Count})
}

func (f Fault) String() string {
	s := fmt.Sprintf("%7.1fs %-17s", f.At.Seconds(), f.Kind)
	if f.Target != "" {
		s += " " + f.Target
	}
	if f.For > 0 {
		s += units.Sprintf(" for %v", f.For)
	}
	if f.Count > 0 {
		s += fmt.Sprintf(" x%d", f.Count)
	}
	return s
}

// Targets names what the nemesis may hit.
type Targets struct {
	Daemons []string // every process (manager, switch, agents)
	Agents  []string // the agents, whose credentials rotate
	Boxes   []string // the boxes, whose links are cut
	Hosts   []string // the hosts, whose agents' APIs go out
}

// Schedule draws the faults of a campaign of length d from seed: one at
// a time (each healed before the next starts, so that the checker can
// tell which fault a symptom follows), the first after a warm-up, none in
// the last second. The first faults visit every kind in a seeded order, so
// that a short campaign still injects several kinds. Pure: the same seed
// and arguments give the same schedule.
func Schedule(seed int64, d time.Duration, t Targets) []Fault {
	r := rand.New(rand.NewPCG(uint64(seed), 0x6368616f73)) // "chaos"
	kinds := append([]string(nil), Kinds...)
	r.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	between := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(r.Int64N(int64(hi-lo)+1)).Truncate(100*time.Millisecond)
	}
	pick := func(xs []string) string {
		if len(xs) == 0 {
			return ""
		}
		return xs[r.IntN(len(xs))]
	}
	var out []Fault
	at := 3 * time.Second // warm-up: the first allocations come up
	for i := 0; ; i++ {
		k := kinds[i%len(kinds)]
		if i >= len(kinds) {
			k = Kinds[r.IntN(len(Kinds))]
		}
		f := Fault{At: at, Kind: k}
		switch k {
		case FaultKill, FaultStop:
			f.Target, f.For = pick(t.Daemons), between(300*time.Millisecond, 3*time.Second)
		case FaultRestart:
			f.Target = pick(t.Daemons)
		case FaultRotateCredential:
			f.Target = pick(t.Agents)
		case FaultLinkCut:
			f.Target, f.For = pick(t.Boxes), between(300*time.Millisecond, 3*time.Second)
		case FaultLoss:
			// Long enough for copies and rekeys to cross the lossy cable.
			f.Target, f.For = pick(t.Boxes), between(3*time.Second, 10*time.Second)
		case FaultAPIOutage:
			f.Target, f.For = pick(t.Hosts), between(APIOutageMin, APIOutageMax)
		case FaultRekeyStorm:
			f.Count = 10 + r.IntN(21)
		case FaultClientFlood:
			f.Count = 100 + r.IntN(201)
		}
		if f.At+f.For > d-time.Second {
			return out
		}
		out = append(out, f)
		// The next fault leaves the system time to recover from this one.
		at = f.At + f.For + between(1500*time.Millisecond, 3500*time.Millisecond)
	}
}
