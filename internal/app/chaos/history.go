package chaos

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Event kinds of a history.
const (
	EvOp    = "op"    // a client's call (Name: alloc, free, rekey, ...)
	EvFault = "fault" // the nemesis starts a fault
	EvHeal  = "heal"  // the nemesis ends one
	EvObs   = "obs"   // a snapshot of the whole system
)

// Event is one entry of a history.
type Event struct {
	T       time.Duration // since the campaign started
	Kind    string
	Name    string // the op or fault kind
	Subject string // the allocation, daemon or box
	Err     string // a failed op
	Obs     *Obs   // EvObs
}

// MarshalJSON writes T in milliseconds.
func (e Event) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		TMS     float64 `json:"t_ms"`
		Kind    string  `json:"kind"`
		Name    string  `json:"name,omitempty"`
		Subject string  `json:"subject,omitempty"`
		Err     string  `json:"err,omitempty"`
		Obs     *Obs    `json:"obs,omitempty"`
	}{float64(e.T.Microseconds()) / 1000, e.Kind, e.Name, e.Subject, e.Err, e.Obs})
}

func (e Event) String() string {
	s := fmt.Sprintf("%7.2fs %-5s %s", e.T.Seconds(), e.Kind, e.Name)
	if e.Subject != "" {
		s += " " + e.Subject
	}
	if e.Err != "" {
		s += ": " + e.Err
	}
	return s
}

// Obs is what an observer saw of the whole system at one time.
type Obs struct {
	ManagerUp    bool       `json:"manager_up"`
	TableVersion uint64     `json:"table_version"` // the manager's forwarding table
	SwitchUp     bool       `json:"switch_up"`
	SwitchTable  uint64     `json:"switch_table_version"` // the table version the switch has in force
	Allocations  []AllocObs `json:"allocations"`
	Unhealthy    []string   `json:"unhealthy,omitempty"` // GPUs the manager lists unhealthy
	// Agents by name (a host or box ID); an agent that did not answer is
	// absent.
	Agents map[string][]PairObs `json:"agents"`
}

// AllocObs is one allocation as the manager answers it.
type AllocObs struct {
	ID       string   `json:"id"`
	Host     string   `json:"host"`
	State    string   `json:"state"`              // pending, active, releasing, degraded
	Degraded string   `json:"degraded,omitempty"` // the reason, with State degraded
	GPUs     []Assign `json:"gpus"`
	Lost     []string `json:"lost,omitempty"`
}

// Assign is one pair of an allocation.
type Assign struct {
	Pair uint32 `json:"pair"`
	GPU  string `json:"gpu"`
	Box  string `json:"box"`
}

// PairObs is one pair as an agent reports it.
type PairObs struct {
	ID         uint32 `json:"id"`
	Allocation string `json:"allocation"`
	Link       string `json:"link"`           // init, up, down
	Gen        uint32 `json:"key_generation"` // key generation
	// KeyFP names the key in use (not the key); KeysRefused counts the
	// keys the agent refused for the pair since it programmed it (a
	// generation not newer than one held), KeyRefusal is the last.
	KeyFP       string `json:"key_fingerprint,omitempty"`
	KeysRefused uint64 `json:"keys_refused,omitempty"`
	KeyRefusal  string `json:"key_refusal,omitempty"`
	// Host side: the slot of the pair's GPU: whether the host has it
	// enumerated, and if not, how it left (surprise, hot-remove) and why.
	Present bool   `json:"present,omitempty"`
	Removed string `json:"removed,omitempty"`
	Vendor  string `json:"vendor,omitempty"`
	Boot0   string `json:"boot0,omitempty"`
}

func (o *Obs) agentPair(agent string, pair uint32) (PairObs, bool, bool) {
	ps, up := o.Agents[agent]
	for _, p := range ps {
		if p.ID == pair {
			return p, true, up
		}
	}
	return PairObs{}, false, up
}

// pairLine describes one pair of a at both ends, for excerpts.
func (o *Obs) pairLine(a AllocObs, g Assign) string {
	end := func(agent string) string {
		p, ok, up := o.agentPair(agent, g.Pair)
		switch {
		case !up:
			return agent + " unreachable"
		case !ok:
			return agent + " has no such pair"
		}
		s := fmt.Sprintf("%s link=%s gen=%d", agent, p.Link, p.Gen)
		if agent == a.Host && !p.Present {
			s += " gpu off the host"
			if p.Removed != "" {
				s += ": " + p.Removed
			}
		}
		return s
	}
	st := a.State
	if a.Degraded != "" {
		st += " (" + a.Degraded + ")"
	}
	return fmt.Sprintf("pair %d of %s gpu %s: manager %s; %s; %s", g.Pair, a.ID, g.GPU, st, end(a.Host), end(g.Box))
}

// live: the allocation's pairs should run (the saga is done).
func (a AllocObs) live() bool { return a.State == "active" || a.State == "degraded" }

// converged reports whether o is a settled system and, if not, why.
func (o *Obs) converged() (bool, []string) {
	var why []string
	if !o.ManagerUp {
		return false, []string{"the manager does not answer"}
	}
	if !o.SwitchUp {
		why = append(why, "the switch does not answer")
	} else if o.SwitchTable != o.TableVersion {
		why = append(why, fmt.Sprintf("switch table version %d, manager's %d", o.SwitchTable, o.TableVersion))
	}
	want := map[string][]uint32{}
	for agent := range o.Agents {
		want[agent] = nil
	}
	for _, a := range o.Allocations {
		if !a.live() {
			why = append(why, fmt.Sprintf("allocation %s is %s", a.ID, a.State))
			continue
		}
		for _, g := range a.GPUs {
			want[a.Host] = append(want[a.Host], g.Pair)
			want[g.Box] = append(want[g.Box], g.Pair)
			h, hok, _ := o.agentPair(a.Host, g.Pair)
			b, bok, _ := o.agentPair(g.Box, g.Pair)
			if !hok || !bok || h.Link != "up" || b.Link != "up" || !h.Present || h.Gen != b.Gen {
				why = append(why, o.pairLine(a, g))
			}
		}
	}
	for agent, pairs := range want {
		ps, up := o.Agents[agent]
		if !up {
			why = append(why, agent+" does not answer")
			continue
		}
		var have []uint32
		for _, p := range ps {
			have = append(have, p.ID)
		}
		slices.Sort(have)
		slices.Sort(pairs)
		if !slices.Equal(have, pairs) {
			why = append(why, fmt.Sprintf("%s runs pairs %v, the manager's journal has %v there", agent, have, pairs))
		}
	}
	slices.Sort(why)
	return len(why) == 0, why
}

// excerpt is the part of h around [from, to] that explains a violation:
// the faults and heals in it (three seconds before from included, and the
// last fault before that), the ops
// on the subject and lines describing it at the first and last
// observation.
func excerpt(h []Event, from, to time.Duration, describe func(*Obs) string, about ...string) []string {
	type line struct {
		t time.Duration
		s string
	}
	var faults, ops []line
	var first, last *Event
	var before []line // the last fault before the window, and its heal: the likely cause
	for i := range h {
		e := &h[i]
		if e.T < from-3*time.Second && (e.Kind == EvFault || e.Kind == EvHeal && len(before) > 0) {
			if e.Kind == EvFault {
				before = before[:0]
			}
			before = append(before, line{e.T, e.String()})
		}
		if e.T < from-3*time.Second || e.T > to {
			continue
		}
		switch {
		case e.Kind == EvObs:
			if e.T >= from && first == nil {
				first = e
			}
			if e.T >= from {
				last = e
			}
		case e.Kind != EvOp:
			faults = append(faults, line{e.T, e.String()}) // every fault and heal
		case mentions(e.Subject, about) && (e.Name != "copy" || e.Err != ""):
			ops = append(ops, line{e.T, e.String()}) // the ops on the subject, the copies that failed
		}
	}
	const most = 8 // the excerpt stays readable: the first ops and the last
	if len(ops) > most {
		skipped := line{ops[most/2].t, fmt.Sprintf("         ... %d more", len(ops)-most)}
		ops = append(append(ops[:most/2:most/2], skipped), ops[len(ops)-most/2:]...)
	}
	acts := append(append(before, faults...), ops...)
	if describe != nil && first != nil {
		obs := []*Event{first}
		if last != first {
			obs = append(obs, last)
		}
		for _, e := range obs {
			acts = append(acts, line{e.T, fmt.Sprintf("%7.2fs obs   %s", e.T.Seconds(), describe(e.Obs))})
		}
	}
	slices.SortStableFunc(acts, func(x, y line) int { return cmp.Compare(x.t, y.t) })
	out := make([]string, len(acts))
	for i, l := range acts {
		out[i] = l.s
	}
	return out
}

func mentions(s string, about []string) bool {
	for _, a := range about {
		if a != "" && strings.Contains(s, a) {
			return true
		}
	}
	return false
}

func joinWhy(why []string) string {
	const most = 4
	if len(why) > most {
		return strings.Join(why[:most], "; ") + fmt.Sprintf("; and %d more", len(why)-most)
	}
	return strings.Join(why, "; ")
}
