package manager

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/fabric/store"
)

// Link state. Either end's agent (the box's or the host's bridge) reports
// a pair whose link went down (its peer fell silent: a host, box or path
// died or paused) and reports it up again. A pair down for longer than
// Config.DegradedAfter makes its allocation degraded, with the reason, in
// the API's answers, the events (allocation_degraded) and the metrics
// (dxpu_allocations_degraded); the link back up, from either end, makes
// it active again (allocation_recovered). A link down says nothing of
// the GPU's health (agentreport.go): the GPU stays lent and healthy.
//
// A pair's link-down is kept in the store too (linkdown/<allocation>/<pair>:
// since and reason; deleted when it comes up or its allocation goes), so
// a restarted manager or a new leader starts with the pairs that were
// down, degraded at once if they have been down past the bound, instead
// of every link up until agents report again (agents report transitions
// only). The leader's memory stays the one it answers from.

// DefaultDegradedAfter is how long a pair may be down before its
// allocation is degraded.
const DefaultDegradedAfter = 10 * time.Second

// linkKey names one pair of one allocation (pair IDs are reused).
type linkKey struct {
	alloc string
	pair  uint32
}

type pairDown struct {
	since    time.Time
	reason   string
	degraded bool
	timer    *time.Timer
}

type linkState struct {
	mu   sync.Mutex
	down map[linkKey]*pairDown
	// persist orders the store writes of reports (down, up, forget) as
	// their memory changes are ordered, without holding mu over I/O.
	persist sync.Mutex
}

func newLinkState() *linkState { return &linkState{down: map[linkKey]*pairDown{}} }

// keyLinkDown/<allocation>/<pair>: a pair reported down ({"since","reason"}).
const keyLinkDown = "linkdown/"

func linkDownKey(k linkKey) string {
	return keyLinkDown + k.alloc + "/" + strconv.FormatUint(uint64(k.pair), 10)
}

type storedLinkDown struct {
	Since  time.Time `json:"since"`
	Reason string    `json:"reason"`
}

// persistLink writes (d != nil) or deletes a pair's link-down record. A
// store that fails is logged: the memory state stands, and the next
// report or restart writes again.
func (m *Manager) persistLink(k linkKey, d *storedLinkDown) {
	op := store.Delete(linkDownKey(k))
	if d != nil {
		op = putJSON(linkDownKey(k), d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.StepTimeout)
	defer cancel()
	if err := m.cfg.Store.Apply(ctx, op); err != nil {
		m.log.Warn("keeping a pair's link state in the store failed; it is in memory only until the next report", "allocation", k.alloc, "pair", k.pair, "err", err)
	}
}

// restoreLinks replaces the link state with the store's (a new leader's
// start): pairs down past the bound are degraded at once, the others when
// their bound passes; records of pairs no allocation of p holds go.
func (m *Manager) restoreLinks(ctx context.Context, p *pool.Pool) {
	ls := m.links
	ls.persist.Lock()
	defer ls.persist.Unlock()
	ls.mu.Lock()
	for k, d := range ls.down {
		d.timer.Stop()
		delete(ls.down, k)
	}
	ls.mu.Unlock()
	kvs, err := m.cfg.Store.List(ctx, keyLinkDown)
	if err != nil {
		m.log.Warn("reading the pairs reported down failed; links count as up until agents report", "err", err)
		return
	}
	var stale []store.Op
	for _, kv := range kvs {
		k, d, ok := parseLinkDown(kv)
		a, err := p.Allocation(k.alloc)
		if !ok || err != nil || !holdsPair(a, k.pair) {
			stale = append(stale, store.Delete(kv.Key))
			continue
		}
		pd := &pairDown{since: d.Since, reason: d.Reason}
		ls.mu.Lock()
		ls.down[k] = pd
		pd.timer = time.AfterFunc(max(0, time.Until(d.Since.Add(m.cfg.DegradedAfter))), func() { m.degrade(k, pd) })
		ls.mu.Unlock()
	}
	if len(stale) > 0 {
		if err := m.cfg.Store.Apply(ctx, stale...); err != nil {
			m.log.Warn("forgetting stale link-down records failed", "err", err)
		}
	}
}

func parseLinkDown(kv store.KV) (linkKey, storedLinkDown, bool) {
	var d storedLinkDown
	rest, _ := strings.CutPrefix(kv.Key, keyLinkDown)
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 {
		return linkKey{}, d, false
	}
	pair, err := strconv.ParseUint(rest[i+1:], 10, 32)
	if err != nil || json.Unmarshal(kv.Value, &d) != nil {
		return linkKey{}, d, false
	}
	return linkKey{rest[:i], uint32(pair)}, d, true
}

// pairLinkDown records that pair as of allocation a is down; past
// DegradedAfter, if nobody reported it up, a is degraded.
func (m *Manager) pairLinkDown(a pool.Allocation, as pool.Assignment, reporter, reason string) {
	k := linkKey{a.ID, as.Pair}
	ls := m.links
	ls.persist.Lock()
	defer ls.persist.Unlock()
	ls.mu.Lock()
	gone := m.sweepLinksLocked()
	if _, ok := ls.down[k]; ok {
		ls.mu.Unlock()
		m.forgetLinks(gone)
		return // already down: the first report's time and reason stand
	}
	d := &pairDown{since: time.Now(), reason: fmt.Sprintf("pair %d (gpu %s) link down, reported by %s: %s", as.Pair, as.GPU, reporter, reason)}
	ls.down[k] = d
	d.timer = time.AfterFunc(m.cfg.DegradedAfter, func() { m.degrade(k, d) })
	ls.mu.Unlock()
	m.forgetLinks(gone)
	m.persistLink(k, &storedLinkDown{Since: d.since, Reason: d.reason})
}

// forgetLinks deletes the store records of pairs sweepLinksLocked dropped.
func (m *Manager) forgetLinks(gone []linkKey) {
	for _, k := range gone {
		m.persistLink(k, nil)
	}
}

// degrade marks a pair still down past the bound, once.
func (m *Manager) degrade(k linkKey, d *pairDown) {
	p, err := m.livePool()
	if err != nil {
		return
	}
	a, err := p.Allocation(k.alloc)
	ls := m.links
	ls.mu.Lock()
	if ls.down[k] != d || d.degraded {
		ls.mu.Unlock()
		return
	}
	if err != nil || !holdsPair(a, k.pair) {
		delete(ls.down, k) // released, or its GPU failed: nothing to degrade
		ls.mu.Unlock()
		return
	}
	d.degraded = true
	as := assignment(a, k.pair)
	// The event goes in before the state shows (under the lock the API's
	// answers take): a client that sees the allocation degraded finds the
	// event that says why.
	m.events.add(Event{Type: EventAllocationDegraded, Allocation: a.ID, Host: a.Host, Box: as.Box, GPUs: []string{as.GPU},
		Pair: k.pair, Reason: d.reason})
	ls.mu.Unlock()
	m.metrics.degradations.Inc()
	m.log.Warn("allocation degraded: a pair's link stays down", "allocation", a.ID, "host", a.Host, "pair", k.pair,
		"gpu", as.GPU, "down_for", time.Since(d.since).Round(time.Millisecond), "reason", d.reason)
}

// pairLinkUp forgets pair as of a being down; if that degraded a, a is
// active again (unless another pair keeps it degraded). It reports the
// state a is in now.
func (m *Manager) pairLinkUp(a pool.Allocation, as pool.Assignment, reporter string) pool.State {
	k := linkKey{a.ID, as.Pair}
	ls := m.links
	ls.persist.Lock()
	ls.mu.Lock()
	d, ok := ls.down[k]
	if ok {
		d.timer.Stop()
		delete(ls.down, k)
		if d.degraded { // before the state shows, as degrade does
			m.events.add(Event{Type: EventAllocationRecovered, Allocation: a.ID, Host: a.Host, Box: as.Box, GPUs: []string{as.GPU},
				Pair: as.Pair, Reason: fmt.Sprintf("pair %d link up, reported by %s", as.Pair, reporter)})
		}
	}
	ls.mu.Unlock()
	if ok {
		m.persistLink(k, nil)
	}
	ls.persist.Unlock()
	if ok && d.degraded {
		m.log.Info("pair link up again", "allocation", a.ID, "pair", as.Pair, "gpu", as.GPU, "reporter", reporter,
			"down_for", time.Since(d.since).Round(time.Millisecond))
	}
	return m.withLinkState(a).State
}

// withLinkState returns a as the API answers it: degraded, with the
// reason, while pairs of it are down past the bound.
func (m *Manager) withLinkState(a pool.Allocation) pool.Allocation {
	if a.State != pool.StateActive {
		return a
	}
	ls := m.links
	ls.mu.Lock()
	defer ls.mu.Unlock()
	var deg *pool.Degradation
	var reasons []string
	for _, g := range a.GPUs {
		d, ok := ls.down[linkKey{a.ID, g.Pair}]
		if u, unreachable := m.boxUnreachable(g.Box); unreachable && (!ok || !d.degraded) {
			// The box's agent does not answer (reachability.go): as
			// degrading as a link down past the bound, for this pair.
			ok, d = true, &pairDown{since: u.Since, reason: u.Reason, degraded: true}
		}
		if !ok || !d.degraded {
			continue
		}
		if deg == nil {
			deg = &pool.Degradation{Since: d.since}
		}
		deg.Pairs = append(deg.Pairs, g.Pair)
		reasons = append(reasons, d.reason)
		if d.since.Before(deg.Since) {
			deg.Since = d.since
		}
	}
	if deg == nil {
		return a
	}
	deg.Reason = strings.Join(reasons, "; ")
	a.State, a.Degraded = pool.StateDegraded, deg
	return a
}

// degradedAllocations counts the allocations degraded now.
func (m *Manager) degradedAllocations(p *pool.Pool) int {
	ls := m.links
	ls.mu.Lock()
	defer ls.mu.Unlock()
	var ids []string
	for k, d := range ls.down {
		if !d.degraded {
			continue
		}
		if a, err := p.Allocation(k.alloc); err == nil && a.State == pool.StateActive && holdsPair(a, k.pair) {
			ids = append(ids, k.alloc)
		}
	}
	for _, a := range p.Allocations() {
		if a.State != pool.StateActive {
			continue
		}
		for _, g := range a.GPUs {
			if _, ok := m.boxUnreachable(g.Box); ok {
				ids = append(ids, a.ID)
			}
		}
	}
	sort.Strings(ids)
	return len(slices.Compact(ids))
}

// sweepLinksLocked forgets reports on pairs that no allocation holds any
// more (released, or their GPU failed) and returns them, for the caller
// to forget in the store (forgetLinks) once it released mu.
func (m *Manager) sweepLinksLocked() []linkKey {
	p, err := m.livePool()
	if err != nil {
		return nil
	}
	var gone []linkKey
	for k, d := range m.links.down {
		if a, err := p.Allocation(k.alloc); err != nil || !holdsPair(a, k.pair) {
			d.timer.Stop()
			delete(m.links.down, k)
			gone = append(gone, k)
		}
	}
	return gone
}

func holdsPair(a pool.Allocation, pair uint32) bool {
	return slices.ContainsFunc(a.GPUs, func(g pool.Assignment) bool { return g.Pair == pair })
}

func assignment(a pool.Allocation, pair uint32) pool.Assignment {
	for _, g := range a.GPUs {
		if g.Pair == pair {
			return g
		}
	}
	return pool.Assignment{}
}
