package chaos

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/dxpu/dxpu/internal/app/units"
)

// Violation kinds.
const (
	VDataCorruption   = "data_corruption"
	VPairDown         = "pair_down_not_degraded"
	VSplitKey         = "split_key_generation"
	VHealthyGPURemove = "healthy_gpu_removed"
	VNotConverged     = "not_converged"
	// VKeyGeneration: a pair's key generations did not strictly increase
	// (KEY-9, KEY-10; issue 20, finding 2): an agent refused a key as
	// not newer than one it holds, one generation of a pair named two
	// keys, or an agent's generation for a pair went back.
	VKeyGeneration = "key_generation_not_increasing"
)

// corruptPrefix starts the error of a copy op whose bytes came back other
// than they went.
const corruptPrefix = "corrupt:"

// Bounds are the checker's limits.
type Bounds struct {
	// PairUp: how long a pair of an active allocation may be down before
	// its allocation must be reported degraded (with a reason).
	PairUp time.Duration
	// KeySplit: how long the two ends of a pair may run different key
	// generations.
	KeySplit time.Duration
	// Converge: how long after the nemesis stops everything must agree.
	Converge time.Duration
}

// Violation is one broken property, with the part of the history that
// shows it.
type Violation struct {
	Kind    string
	Subject string        // the pair, GPU or system
	At      time.Duration // when it was found
	Message string
	Excerpt []string
}

// MarshalJSON writes At in milliseconds.
func (v Violation) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Kind    string   `json:"kind"`
		Subject string   `json:"subject"`
		AtMS    int64    `json:"at_ms"`
		Message string   `json:"message"`
		Excerpt []string `json:"excerpt"`
	}{v.Kind, v.Subject, v.At.Milliseconds(), v.Message, v.Excerpt})
}

// Result is what Check finds.
type Result struct {
	Violations []Violation
	// WorstConverge is the longest a fault's heal (or the nemesis's end)
	// took to reach a converged observation.
	WorstConverge time.Duration
	// Converged: the system converged after the nemesis stopped.
	Converged bool
}

type episode struct {
	since    time.Duration
	reported bool
}

// Check judges a history: h in time order, nemesisEnd when the last fault
// was healed. Pure.
func Check(h []Event, nemesisEnd time.Duration, b Bounds) Result {
	return CheckHosts(h, nemesisEnd, b, nil)
}

// CheckHosts is Check with bounds of their own for some hosts' pairs (a VM
// host's); the system converges within the largest Converge of them all.
// Pure.
func CheckHosts(h []Event, nemesisEnd time.Duration, b Bounds, perHost map[string]Bounds) Result {
	hostBounds := func(host string) Bounds {
		if hb, ok := perHost[host]; ok {
			return hb
		}
		return b
	}
	for _, hb := range perHost {
		b.Converge = max(b.Converge, hb.Converge)
	}
	// Observers stamp a snapshot when it starts and record it when it
	// ends: order by time first.
	h = slices.Clone(h)
	slices.SortStableFunc(h, func(x, y Event) int { return cmp.Compare(x.T, y.T) })
	var res Result
	add := func(kind, subject string, at time.Duration, msg string, ex []string) {
		res.Violations = append(res.Violations, Violation{Kind: kind, Subject: subject, At: at, Message: msg, Excerpt: ex})
	}
	down := map[string]*episode{}  // alloc/pair: down at some end
	split := map[string]*episode{} // alloc/pair: generations differ
	removed := map[string]bool{}   // GPU: unhealthy or lost, reported
	corrupt := map[string]bool{}   // pair/value reported
	boot0 := ""                    // what every GPU (one model) reads
	keyOf := map[string]keySeen{}  // pair/generation: the first key seen under it
	genAt := map[string]uint32{}   // agent/pair: the generation it last ran
	refused := map[string]uint64{} // agent/pair: keys it had refused
	keyBad := map[string]bool{}    // what was reported
	pending, healAt := false, time.Duration(0)
	final := false
	for _, e := range h {
		switch e.Kind {
		case EvOp:
			if e.Name == "copy" && strings.HasPrefix(e.Err, corruptPrefix) {
				add(VDataCorruption, e.Subject, e.T, "copy through "+e.Subject+": "+e.Err,
					excerpt(h, e.T-3*time.Second, e.T, nil, strings.Fields(e.Subject)[0]))
			}
			continue
		case EvFault:
			if pending { // the next fault came before convergence
				res.WorstConverge = max(res.WorstConverge, e.T-healAt)
			}
			pending = false
			continue
		case EvHeal:
			pending, healAt = true, e.T
			continue
		case EvObs:
		default:
			continue
		}
		o := e.Obs
		// Data: every enumerated GPU reads what a GPU of the model reads.
		for agent, ps := range o.Agents {
			for _, p := range ps {
				if !p.Present {
					continue
				}
				bad := ""
				switch {
				case p.Vendor != "0x10de":
					bad = "vendor " + p.Vendor
				case boot0 == "":
					boot0 = p.Boot0
				case p.Boot0 != boot0:
					bad = "PMC_BOOT_0 " + p.Boot0 + ", other GPUs read " + boot0
				}
				if k := fmt.Sprintf("%s/%d/%s", agent, p.ID, bad); bad != "" && !corrupt[k] {
					corrupt[k] = true
					add(VDataCorruption, fmt.Sprintf("pair %d", p.ID), e.T,
						fmt.Sprintf("host %s enumerated pair %d's GPU reading %s", agent, p.ID, bad), excerpt(h, e.T-time.Second, e.T, nil))
				}
			}
		}
		checkKeys(e, o, keyOf, genAt, refused, keyBad, func(subject, msg, alloc string) {
			add(VKeyGeneration, subject, e.T, msg, excerpt(h, e.T-3*time.Second, e.T, nil, alloc))
		})
		if !o.ManagerUp {
			// The manager cannot report degraded while it is down: each
			// episode starts again once it answers.
			clear(down)
			clear(split)
			continue
		}
		// Healthy GPUs removed: the nemesis breaks no GPU.
		gone, holder := map[string]string{}, map[string]string{}
		for _, a := range o.Allocations {
			for _, g := range a.GPUs {
				holder[g.GPU] = a.ID
			}
		}
		for _, g := range o.Unhealthy {
			gone[g] = "marked unhealthy"
		}
		for _, a := range o.Allocations {
			for _, g := range a.Lost {
				gone[g], holder[g] = "lost by allocation "+a.ID, a.ID
			}
		}
		for g, how := range gone {
			if !removed[g] {
				removed[g] = true
				add(VHealthyGPURemove, g, e.T, fmt.Sprintf("healthy GPU %s %s (no fault breaks a GPU)", g, how),
					excerpt(h, e.T-3*time.Second, e.T, nil, g, holder[g]))
			}
		}
		for g := range removed {
			if _, ok := gone[g]; !ok {
				delete(removed, g)
			}
		}
		seen := map[string]bool{}
		for _, a := range o.Allocations {
			if !a.live() {
				continue
			}
			for _, g := range a.GPUs {
				key := fmt.Sprintf("%s/%d", a.ID, g.Pair)
				seen[key] = true
				a, g := a, g
				describe := func(o *Obs) string {
					for _, x := range o.Allocations {
						if x.ID == a.ID {
							return o.pairLine(x, g)
						}
					}
					return fmt.Sprintf("allocation %s gone", a.ID)
				}
				hp, hok, _ := o.agentPair(a.Host, g.Pair)
				bp, bok, _ := o.agentPair(g.Box, g.Pair)
				hb := hostBounds(a.Host)
				// Up: the link at both ends, and the GPU on its host. A
				// host's agent surprise-removes the GPU when the link goes
				// down and plugs it back when it is up again: one that
				// stays off the host is a pair down (issue 20: a removal
				// the link's return does not undo).
				if hok && bok && hp.Link == "up" && bp.Link == "up" && hp.Present {
					delete(down, key)
				} else {
					ep := down[key]
					if ep == nil {
						ep = &episode{since: e.T}
						down[key] = ep
					}
					if !ep.reported && e.T-ep.since > hb.PairUp && (a.State != "degraded" || a.Degraded == "") {
						ep.reported = true
						what := "down"
						if hok && bok && hp.Link == "up" && bp.Link == "up" {
							what = "up but its GPU off " + a.Host
						}
						add(VPairDown, fmt.Sprintf("pair %d", g.Pair), e.T,
							units.Sprintf("pair %d of %s %s for %v (bound %v) and the manager answers %s", g.Pair, a.ID, what,
								(e.T-ep.since).Round(time.Millisecond), hb.PairUp, a.State), excerpt(h, ep.since, e.T, describe, a.ID))
					}
				}
				if hok && bok && hp.Gen != bp.Gen {
					ep := split[key]
					if ep == nil {
						ep = &episode{since: e.T}
						split[key] = ep
					}
					if !ep.reported && e.T-ep.since > hb.KeySplit {
						ep.reported = true
						add(VSplitKey, fmt.Sprintf("pair %d", g.Pair), e.T,
							units.Sprintf("pair %d of %s: %s runs key generation %d, %s %d, for %v (bound %v)", g.Pair, a.ID,
								a.Host, hp.Gen, g.Box, bp.Gen, (e.T-ep.since).Round(time.Millisecond), hb.KeySplit),
							excerpt(h, ep.since, e.T, describe, a.ID))
					}
				} else {
					delete(split, key)
				}
			}
		}
		for k := range down {
			if !seen[k] {
				delete(down, k)
			}
		}
		for k := range split {
			if !seen[k] {
				delete(split, k)
			}
		}
		ok, _ := o.converged()
		if ok && pending {
			res.WorstConverge = max(res.WorstConverge, e.T-healAt)
			pending = false
		}
		if ok && e.T >= nemesisEnd && !final {
			final, res.Converged = true, true
			res.WorstConverge = max(res.WorstConverge, e.T-nemesisEnd)
			if e.T-nemesisEnd > b.Converge {
				add(VNotConverged, "system", e.T, units.Sprintf("converged %v after the nemesis stopped (bound %v)",
					(e.T-nemesisEnd).Round(time.Millisecond), b.Converge), nil)
			}
		}
	}
	if !final {
		var last *Event
		for i := range h {
			if h[i].Kind == EvObs && h[i].T >= nemesisEnd {
				last = &h[i]
			}
		}
		msg := "no observation after the nemesis stopped"
		var ex []string
		at := nemesisEnd
		if last != nil {
			_, why := last.Obs.converged()
			at = last.T
			msg = units.Sprintf("not converged %v after the nemesis stopped (bound %v): %s", (last.T - nemesisEnd).Round(time.Millisecond), b.Converge, joinWhy(why))
			ex = excerpt(h, nemesisEnd, last.T, nil)
			for _, w := range why {
				ex = append(ex, fmt.Sprintf("%7.2fs obs   %s", last.T.Seconds(), w))
			}
		}
		if pending {
			res.WorstConverge = max(res.WorstConverge, at-healAt)
		}
		add(VNotConverged, "system", at, msg, ex)
	}
	return res
}

// keySeen is where a pair's generation was first seen, with which key.
type keySeen struct {
	fp, agent string
	t         time.Duration
}

// checkKeys holds one observation's agents to KEY-9/KEY-10: a pair's
// generations strictly increase and each names one key. It needs no
// manager: what the agents run is the evidence. Each finding is reported
// once per agent and pair (a refusal, a step back) or per generation (two
// keys).
func checkKeys(e Event, o *Obs, keyOf map[string]keySeen, genAt map[string]uint32, refused map[string]uint64,
	reported map[string]bool, add func(subject, msg, alloc string)) {
	for _, agent := range slices.Sorted(maps.Keys(o.Agents)) {
		for _, p := range o.Agents[agent] {
			ap := fmt.Sprintf("%s/%d", agent, p.ID)
			subject := fmt.Sprintf("pair %d", p.ID)
			// A count below the last one is a restarted agent's (or a
			// pair programmed again): counting starts over.
			if p.KeysRefused > refused[ap] && !reported["refused/"+ap] {
				reported["refused/"+ap] = true
				add(subject, fmt.Sprintf("%s refused %d key(s) for pair %d of %s, last: %s (the manager issued a generation not above one the pair had)",
					agent, p.KeysRefused-refused[ap], p.ID, p.Allocation, p.KeyRefusal), p.Allocation)
			}
			refused[ap] = p.KeysRefused
			if last, ok := genAt[ap]; ok && p.Gen < last && !reported["back/"+ap] {
				reported["back/"+ap] = true
				add(subject, fmt.Sprintf("%s runs pair %d of %s under key generation %d after %d", agent, p.ID, p.Allocation, p.Gen, last), p.Allocation)
			}
			genAt[ap] = p.Gen
			if p.KeyFP == "" {
				continue
			}
			pg := fmt.Sprintf("%d/%d", p.ID, p.Gen)
			first, ok := keyOf[pg]
			switch {
			case !ok:
				keyOf[pg] = keySeen{fp: p.KeyFP, agent: agent, t: e.T}
			case first.fp != p.KeyFP && !reported["two/"+pg]:
				reported["two/"+pg] = true
				add(subject, fmt.Sprintf("key generation %d of pair %d names two keys: %s ran key %s at %.2fs, %s runs key %s (pair of %s)",
					p.Gen, p.ID, first.agent, first.fp, first.t.Seconds(), agent, p.KeyFP, p.Allocation), p.Allocation)
			}
		}
	}
}
