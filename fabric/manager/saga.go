package manager

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/fabric/store"
)

// Step names one saga step; they run in this order and are undone in
// reverse.
type Step string

const (
	StepGPUBridge  Step = "gpu_bridge"
	StepSwitch     Step = "switch"
	StepHostBridge Step = "host_bridge"
	StepHotAdd     Step = "hot_add"
)

var steps = []Step{StepGPUBridge, StepSwitch, StepHostBridge, StepHotAdd}

// StepError says which saga step failed for which pair.
type StepError struct {
	Step Step
	Pair uint32
	Err  error
}

func (e *StepError) Error() string {
	return fmt.Sprintf("saga step %s for pair %d: %v", e.Step, e.Pair, e.Err)
}
func (e *StepError) Unwrap() error { return e.Err }

// ErrBusy is returned for an allocation that is inside a saga already.
var ErrBusy = errors.New("allocation busy")

func (m *Manager) do(ctx context.Context, s Step, p Pair) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.StepTimeout)
	defer cancel()
	switch s {
	case StepGPUBridge:
		return m.cfg.GPUBridge.ProgramPair(ctx, p)
	case StepSwitch:
		if err := m.table.ProgramPair(ctx, p); err != nil {
			return err
		}
		if m.cfg.Switch != nil {
			return m.cfg.Switch.ProgramPair(ctx, p)
		}
		return nil
	case StepHostBridge:
		return m.cfg.HostBridge.ProgramPair(ctx, p)
	case StepHotAdd:
		return m.cfg.HostBridge.HotAdd(ctx, p)
	}
	return fmt.Errorf("unknown step %q", s)
}

func (m *Manager) undo(ctx context.Context, s Step, p Pair) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.StepTimeout)
	defer cancel()
	switch s {
	case StepGPUBridge:
		return m.cfg.GPUBridge.RemovePair(ctx, p)
	case StepSwitch:
		var err error
		if m.cfg.Switch != nil {
			err = m.cfg.Switch.RemovePair(ctx, p)
		}
		return errors.Join(err, m.table.RemovePair(ctx, p))
	case StepHostBridge:
		return m.cfg.HostBridge.RemovePair(ctx, p)
	case StepHotAdd:
		return m.cfg.HostBridge.HotRemove(ctx, p)
	}
	return fmt.Errorf("unknown step %q", s)
}

// pairs expands an allocation into agent pairs.
func (m *Manager) pairsOf(p *pool.Pool, a pool.Allocation) ([]Pair, error) {
	h, err := p.Host(a.Host)
	if err != nil {
		return nil, err
	}
	out := make([]Pair, 0, len(a.GPUs))
	for _, as := range a.GPUs {
		b, err := p.Box(as.Box)
		if err != nil {
			return nil, err
		}
		g, err := p.GPU(as.GPU)
		if err != nil {
			return nil, err
		}
		out = append(out, Pair{
			ID: as.Pair, Allocation: a.ID, Host: h.ID, HostPort: as.HostPort, HostBridge: h.Bridge,
			Box: b.ID, GPU: g.ID, GPUBridge: b.Bridge, BDF: g.BDF, Model: g.Model, MemoryMiB: g.MemoryMiB,
			HostAgent: h.AgentURL, GPUAgent: b.AgentURL,
		})
	}
	// No keys here: a pair's key is drawn only where it is programmed
	// (keyBook), never per listing or per agent.
	return m.withCredentials(out), nil
}

// withFreshKeys gives every pair of a new allocation a fresh key.
func (m *Manager) withFreshKeys(ctx context.Context, pairs []Pair) error {
	ids := make([]uint32, len(pairs))
	for i := range pairs {
		ids[i] = pairs[i].ID
	}
	ks, err := m.issueKeys(ctx, ids)
	if err != nil {
		return err
	}
	for i := range pairs {
		pairs[i].Key = ks[i]
	}
	return nil
}

// What holds a claim on an allocation, for the 409 a second change gets.
const (
	claimAllocate  = "being allocated"
	claimRelease   = "being released"
	claimRekey     = "being rekeyed"
	claimReconcile = "being repaired by the reconciler"
)

// claim takes id for one change (what: one of the claim* phrases); when
// another change holds it, it returns false and what that one is.
func (m *Manager) claim(id, what string) (string, bool) {
	m.busyMu.Lock()
	defer m.busyMu.Unlock()
	if held, ok := m.busy[id]; ok {
		return held, false
	}
	m.busy[id] = what
	return "", true
}

func (m *Manager) unclaim(id string) {
	m.busyMu.Lock()
	delete(m.busy, id)
	m.busyMu.Unlock()
}

// Allocate lends req.Count GPUs to req.Host: it reserves them, journals the
// allocation, programs GPU bridges, switch and host bridge, hot-adds the
// GPUs and marks the allocation active. Any failure undoes what was done
// and leaves the pool as it was.
//
// With req.RequestID set, a retry of a request already served returns the
// existing allocation together with an error wrapping pool.ErrDuplicate
// (the API answers 200 with it instead of 201); the same RequestID with
// other parameters is pool.ErrConflict.
func (m *Manager) Allocate(ctx context.Context, req pool.Request) (pool.Allocation, error) {
	start := time.Now()
	a, err := m.allocate(ctx, req)
	m.metrics.observeAlloc(time.Since(start), err)
	return a, err
}

func (m *Manager) allocate(ctx context.Context, req pool.Request) (pool.Allocation, error) {
	p, err := m.livePool()
	if err != nil {
		return pool.Allocation{}, err
	}
	id := "a-" + randomID(6)
	m.claim(id, claimAllocate)
	defer m.unclaim(id)
	a, err := p.Reserve(id, req)
	if errors.Is(err, pool.ErrDuplicate) {
		if a.Request != req {
			// A retry repeats its request; another request under the same
			// key is the client's mistake, not this allocation (a retry
			// with another count was answered with the old allocation).
			return pool.Allocation{}, fmt.Errorf("%w: request_id %q is allocation %s, made with other parameters (host %s, count %d)", pool.ErrConflict, req.RequestID, a.ID, a.Request.Host, a.Request.Count)
		}
		if a.State == pool.StateActive {
			return a, err // the caller answers with the existing allocation
		}
		return pool.Allocation{}, fmt.Errorf("%w: request_id %q is allocation %s, %s for host %s", ErrBusy, req.RequestID, a.ID, a.State, a.Host)
	}
	if err != nil {
		return pool.Allocation{}, err
	}
	// The journal entry: after a crash a pending allocation is rolled back.
	if err := m.cfg.Store.Apply(ctx, putJSON(allocKey(id), a)); err != nil {
		p.Remove(id)
		return pool.Allocation{}, fmt.Errorf("manager: journal allocation: %w", err)
	}
	pairs, err := m.pairsOf(p, a)
	undone := false
	if err == nil {
		err = m.withFreshKeys(ctx, pairs)
	}
	if err == nil {
		undone, err = m.program(ctx, pairs)
	}
	if err == nil {
		for _, pr := range pairs {
			m.keys.setCurrent(pr.ID, pr.Key)
		}
		var active pool.Allocation
		if active, err = p.Activate(id); err == nil {
			if err = m.cfg.Store.Apply(ctx, putJSON(allocKey(id), active)); err == nil {
				m.teardownGone(ctx, pairs, active)
				m.log.Info("allocated", "id", id, "host", req.Host, "gpus", active.GPUIDs())
				m.events.add(Event{Type: EventAllocated, Allocation: id, Host: active.Host, GPUs: active.GPUIDs()})
				return active, nil
			}
			err = fmt.Errorf("manager: journal activation: %w", err)
		}
	}
	m.metrics.sagaFailures.WithLabelValues(stepOf(err)).Inc()
	m.log.Warn("allocation failed; rolling back", "id", id, "host", req.Host, "err", err)
	m.keys.forget(pairs)
	if undone {
		pairs = []Pair{} // program undid its own steps
	}
	if rerr := m.finishRelease(context.WithoutCancel(ctx), p, id, pairs); rerr != nil {
		m.log.Error("rollback incomplete; the reconciler will retry", "id", id, "err", rerr)
		return pool.Allocation{}, fmt.Errorf("allocation failed, rollback pending: %w", err)
	}
	return pool.Allocation{}, fmt.Errorf("allocation rolled back: %w", err)
}

func stepOf(err error) string {
	var se *StepError
	if errors.As(err, &se) {
		return string(se.Step)
	}
	return "store"
}

// program runs the saga steps for every pair; on failure it undoes the
// steps started (the failed one included, since it may have half-applied)
// in reverse order, and reports whether that undo was complete.
func (m *Manager) program(ctx context.Context, pairs []Pair) (undone bool, err error) {
	type done struct {
		s Step
		p Pair
	}
	var log []done
	for _, s := range steps {
		for _, p := range pairs {
			log = append(log, done{s, p})
			if err := m.do(ctx, s, p); err != nil {
				uctx := context.WithoutCancel(ctx)
				var uerr error
				for i := len(log) - 1; i >= 0; i-- {
					uerr = errors.Join(uerr, m.undo(uctx, log[i].s, log[i].p))
				}
				if uerr != nil {
					m.log.Warn("undo after failed step left errors", "err", uerr)
				}
				return uerr == nil, &StepError{Step: s, Pair: p.ID, Err: err}
			}
		}
	}
	return false, nil
}

// teardown undoes every step for the pairs, in reverse order, and reports
// every failure. Removals are idempotent, so it is safe on pairs that were
// never (or only partly) programmed.
func (m *Manager) teardown(ctx context.Context, pairs []Pair) error {
	var err error
	for i := len(steps) - 1; i >= 0; i-- {
		for _, p := range pairs {
			if e := m.undo(ctx, steps[i], p); e != nil {
				err = errors.Join(err, &StepError{Step: steps[i], Pair: p.ID, Err: e})
			}
		}
	}
	return err
}

// teardownGone removes pairs that left the allocation while its saga ran
// (a GPU failed meanwhile).
func (m *Manager) teardownGone(ctx context.Context, pairs []Pair, a pool.Allocation) {
	var gone []Pair
	for _, p := range pairs {
		if !slices.ContainsFunc(a.GPUs, func(as pool.Assignment) bool { return as.Pair == p.ID }) {
			gone = append(gone, p)
		}
	}
	if len(gone) > 0 {
		m.teardown(context.WithoutCancel(ctx), gone)
	}
}

// finishRelease tears an allocation down and forgets it. If an agent fails,
// the allocation stays (journaled as releasing) for the reconciler.
func (m *Manager) finishRelease(ctx context.Context, p *pool.Pool, id string, pairs []Pair) error {
	a, err := p.BeginRelease(id)
	if err != nil {
		return err
	}
	if pairs == nil {
		if pairs, err = m.pairsOf(p, a); err != nil {
			return err
		}
	}
	if terr := m.teardown(ctx, pairs); terr != nil {
		if err := m.cfg.Store.Apply(ctx, putJSON(allocKey(id), a)); err != nil {
			terr = errors.Join(terr, err)
		}
		return terr
	}
	if err := m.cfg.Store.Apply(ctx, store.Delete(allocKey(id))); err != nil {
		return fmt.Errorf("manager: delete journal of %s: %w", id, err)
	}
	m.keys.forget(pairs)
	p.Remove(id)
	return nil
}

// claimAllocation claims an existing allocation for one change (what:
// claimRelease, claimRekey) and loads it; the caller runs unclaim when
// done. A change already under way makes it ErrBusy (409) naming it.
func (m *Manager) claimAllocation(id, what string) (*pool.Pool, pool.Allocation, func(), error) {
	p, err := m.livePool()
	if err != nil {
		return nil, pool.Allocation{}, nil, err
	}
	if held, ok := m.claim(id, what); !ok {
		return nil, pool.Allocation{}, nil, fmt.Errorf("%w: %s is %s; try again when that is done", ErrBusy, id, held)
	}
	a, err := p.Allocation(id)
	if err != nil {
		m.unclaim(id)
		return nil, pool.Allocation{}, nil, err
	}
	return p, a, func() { m.unclaim(id) }, nil
}

// Release gives an allocation's GPUs back: hot-remove on the host, then
// host bridge, switch and GPU bridge, then the pool.
func (m *Manager) Release(ctx context.Context, id string) (pool.Allocation, error) {
	p, a, unclaim, err := m.claimAllocation(id, claimRelease)
	if err != nil {
		return pool.Allocation{}, err
	}
	defer unclaim()
	a.State = pool.StateReleasing
	if err := m.cfg.Store.Apply(ctx, putJSON(allocKey(id), a)); err != nil {
		return pool.Allocation{}, fmt.Errorf("manager: journal release: %w", err)
	}
	if err := m.finishRelease(context.WithoutCancel(ctx), p, id, nil); err != nil {
		return pool.Allocation{}, fmt.Errorf("release of %s incomplete; the reconciler will finish it: %w", id, err)
	}
	m.metrics.releases.Inc()
	m.log.Info("released", "id", id, "host", a.Host, "gpus", a.GPUIDs())
	m.events.add(Event{Type: EventReleased, Allocation: id, Host: a.Host, GPUs: a.GPUIDs()})
	return a, nil
}

// Reconcile runs one reconciliation pass now: it finishes interrupted
// releases and, with agents that list their pairs, removes pairs no
// allocation holds and restores active pairs an agent lost. The leader also
// runs it every ReconcileInterval.
func (m *Manager) Reconcile(ctx context.Context) error {
	if _, err := m.livePool(); err != nil {
		return err
	}
	m.reconcile(ctx, false)
	return nil
}

// reconcile makes agents match the journal. At start-up (full) it rolls
// back pending allocations, finishes releasing ones and re-applies every
// active one; periodically it finishes releases and, with agents that can
// list their pairs, removes unknown pairs and restores lost ones.
func (m *Manager) reconcile(ctx context.Context, full bool) {
	p, err := m.livePool()
	if err != nil {
		return
	}
	m.metrics.reconciles.Inc()
	if full {
		// The forwarding table of every active allocation first: it is
		// the manager's own and fast, while re-applying below waits on
		// agents and the store for every pair's key change.
		var ids []uint32
		for _, a := range p.Allocations() {
			if a.State != pool.StateActive {
				continue
			}
			pairs, _ := m.pairsOf(p, a)
			for _, pr := range pairs {
				ids = append(ids, pr.ID)
				if err := m.do(ctx, StepSwitch, pr); err != nil {
					m.log.Warn("reconcile: programming the switch failed", "id", a.ID, "pair", pr.ID, "err", err)
				}
			}
		}
		// Their new keys' generations in a few store writes, not one each.
		if err := m.prepareKeys(ctx, ids); err != nil {
			m.log.Warn("reconcile: issuing the pairs' keys in bulk failed; each pair issues its own", "err", err)
		}
	}
	for _, a := range p.Allocations() {
		if ctx.Err() != nil {
			return
		}
		if _, ok := m.claim(a.ID, claimReconcile); !ok {
			continue
		}
		switch {
		case a.State == pool.StatePending && full, a.State == pool.StateReleasing:
			if err := m.finishRelease(ctx, p, a.ID, nil); err != nil {
				m.log.Warn("reconcile: release incomplete", "id", a.ID, "err", err)
			} else {
				m.log.Info("reconcile: rolled back", "id", a.ID, "was", a.State)
			}
		case a.State == pool.StateActive && full:
			pairs, err := m.pairsOf(p, a)
			if err == nil {
				err = m.reapply(ctx, pairs)
			}
			if err != nil {
				m.metrics.reconcileErrors.Inc()
				m.log.Warn("reconcile: re-applying allocation failed", "id", a.ID, "err", err)
			}
		case a.State == pool.StateActive:
			m.finishKeyChanges(ctx, p, a)
		}
		m.unclaim(a.ID)
	}
	m.sweep(ctx, p)
}

// reapply runs every step again for an active allocation after the
// manager (re)took the lead; steps are idempotent, so this only fills in
// what an agent lost. The manager kept no key, so each pair gets a new one
// two-phase (changeKey): running bridges change keys without a restart,
// and an end that lost the pair is created under the key its peer
// installs. A pair that fails stays due and the next pass retries it.
func (m *Manager) reapply(ctx context.Context, pairs []Pair) error {
	var first error
	for _, pr := range pairs {
		if err := m.do(ctx, StepSwitch, pr); err != nil {
			return &StepError{Step: StepSwitch, Pair: pr.ID, Err: err}
		}
	}
	for _, pr := range pairs {
		err := m.changeKey(ctx, pr, false)
		if err == nil {
			err = m.hotAddAfterKeyChange(ctx, pr)
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

// finishKeyChanges retries the key changes of an allocation that failed
// at one end (changeKey), with the key already installed where it got,
// and hot-adds the pair again.
func (m *Manager) finishKeyChanges(ctx context.Context, p *pool.Pool, a pool.Allocation) {
	var due []Pair
	for _, as := range a.GPUs {
		if m.keys.isDue(as.Pair) {
			due = append(due, Pair{ID: as.Pair})
		}
	}
	if len(due) == 0 {
		return
	}
	pairs, err := m.pairsOf(p, a)
	if err != nil {
		return
	}
	for _, pr := range pairs {
		if !m.keys.isDue(pr.ID) {
			continue
		}
		err := m.changeKey(ctx, pr, false)
		if err == nil {
			// The change may have created an end its agent lost (a
			// restart while it failed).
			err = m.hotAddAfterKeyChange(ctx, pr)
		}
		if err != nil {
			m.metrics.reconcileErrors.Inc()
			m.log.Warn("reconcile: key change still incomplete", "id", a.ID, "pair", pr.ID, "err", err)
			continue
		}
		m.log.Info("reconcile: key change completed", "id", a.ID, "pair", pr.ID)
	}
}

// sweep asks listing agents for their actual pairs, removes the ones no
// allocation holds, and re-programs active pairs they lost.
func (m *Manager) sweep(ctx context.Context, p *pool.Pool) {
	type agent struct {
		name   string
		list   func(context.Context) ([]Pair, error)
		owns   func(Pair) bool // whether a desired pair lives on this agent
		remove func(context.Context, Pair) error
		add    func(context.Context, Pair) error
		boxes  []string // the boxes whose agent this is (reachability.go)
	}
	all := func(Pair) bool { return true }
	var agents []agent
	hb := m.cfg.HostBridge
	hostRemove := func(ctx context.Context, pr Pair) error {
		return errors.Join(hb.HotRemove(ctx, pr), hb.RemovePair(ctx, pr))
	}
	hostAdd := func(ctx context.Context, pr Pair) error {
		if err := hb.ProgramPair(ctx, pr); err != nil {
			return err
		}
		if err := hb.HotAdd(ctx, pr); err != nil {
			// Take the end down again, so that the next pass finds it
			// lost and restores it, hot-add included, instead of
			// leaving a pair that never reached the host.
			return errors.Join(err, hb.RemovePair(context.WithoutCancel(ctx), pr))
		}
		return nil
	}
	if l, ok := m.cfg.GPUBridge.(PairLister); ok {
		agents = append(agents, agent{"gpu_bridge", l.ListPairs, all, m.cfg.GPUBridge.RemovePair, m.cfg.GPUBridge.ProgramPair, nil})
	}
	if l, ok := m.cfg.Switch.(PairLister); ok && m.cfg.Switch != nil {
		agents = append(agents, agent{"switch", l.ListPairs, all, m.cfg.Switch.RemovePair, m.cfg.Switch.ProgramPair, nil})
	}
	if l, ok := hb.(PairLister); ok {
		agents = append(agents, agent{"host_bridge", l.ListPairs, all, hostRemove, hostAdd, nil})
	}
	// Programmers that reach one agent per bridge are asked at every
	// agent URL the pool knows.
	if l, ok := m.cfg.GPUBridge.(AgentPairLister); ok {
		seen := map[string]bool{}
		boxesAt := map[string][]string{}
		for _, b := range p.Boxes() {
			boxesAt[b.AgentURL] = append(boxesAt[b.AgentURL], b.ID)
		}
		for _, b := range p.Boxes() {
			if url := b.AgentURL; url != "" && !seen[url] {
				seen[url] = true
				cred, _ := m.AgentCredential(BridgeBox, b.ID)
				agents = append(agents, agent{"gpu_bridge " + url,
					func(ctx context.Context) ([]Pair, error) { return l.ListPairsAt(ctx, url, cred) },
					func(pr Pair) bool { return pr.GPUAgent == url },
					func(ctx context.Context, pr Pair) error {
						pr.GPUAgent, pr.GPUAgentCredential = url, cred
						return m.cfg.GPUBridge.RemovePair(ctx, pr)
					},
					m.cfg.GPUBridge.ProgramPair, boxesAt[url]})
			}
		}
	}
	if l, ok := hb.(AgentPairLister); ok {
		seen := map[string]bool{}
		for _, h := range p.Hosts() {
			if url := h.AgentURL; url != "" && !seen[url] {
				seen[url] = true
				cred, _ := m.AgentCredential(BridgeHost, h.ID)
				agents = append(agents, agent{"host_bridge " + url,
					func(ctx context.Context) ([]Pair, error) { return l.ListPairsAt(ctx, url, cred) },
					func(pr Pair) bool { return pr.HostAgent == url },
					func(ctx context.Context, pr Pair) error {
						pr.HostAgent, pr.HostAgentCredential = url, cred
						return hostRemove(ctx, pr)
					},
					hostAdd, nil})
			}
		}
	}
	for _, ag := range agents {
		lctx, cancel := context.WithTimeout(ctx, m.cfg.StepTimeout)
		actual, err := ag.list(lctx)
		cancel()
		if err != nil && !errors.Is(err, ErrCannotList) {
			if ctx.Err() == nil { // the pass was not cut short: the agent did not answer
				m.agentUnanswered(ag.boxes, ag.name, err)
			}
			m.log.Warn("reconcile: listing pairs failed", "agent", ag.name, "err", err)
			continue
		}
		m.agentAnswered(ag.boxes, ag.name)
		if err != nil {
			continue // it answered that it cannot list
		}
		// Desired is read after actual: a pair programmed by a saga that
		// started meanwhile was reserved before it was programmed, so it
		// is already in the pool here.
		desired := map[uint32]Pair{}
		busy := map[string]bool{}
		for _, a := range p.Allocations() {
			m.busyMu.Lock()
			_, busy[a.ID] = m.busy[a.ID]
			m.busyMu.Unlock()
			if ps, err := m.pairsOf(p, a); err == nil {
				for _, pr := range ps {
					desired[pr.ID] = pr
				}
			}
		}
		have := map[uint32]bool{}
		for _, pr := range actual {
			have[pr.ID] = true
			m.keys.observe(pr.ID, pr.HeldGeneration)
			if d, ok := desired[pr.ID]; ok && d.Allocation == pr.Allocation {
				continue
			}
			m.log.Info("reconcile: removing unknown pair", "agent", ag.name, "pair", pr.ID)
			if err := ag.remove(ctx, pr); err != nil {
				m.log.Warn("reconcile: removing pair failed", "agent", ag.name, "pair", pr.ID, "err", err)
			}
		}
		for id, d := range desired {
			a, err := p.Allocation(d.Allocation)
			if have[id] || !ag.owns(d) || busy[d.Allocation] || err != nil || a.State != pool.StateActive {
				continue
			}
			if _, ok := m.claim(d.Allocation, claimReconcile); !ok {
				continue // a rekey or release took it meanwhile: the next pass looks again
			}
			m.log.Info("reconcile: restoring lost pair", "agent", ag.name, "pair", id)
			err = m.restore(ctx, d, ag.add)
			m.unclaim(d.Allocation)
			if err != nil {
				m.log.Warn("reconcile: restoring pair failed", "agent", ag.name, "pair", id, "err", err)
			}
		}
	}
}

// restore programs an end that lost its pair with the key the other end
// holds, so that both ends share it (KEY-11). Without one (a restarted
// manager that could not re-key the pair yet, or a key change under way)
// both ends are moved to a new key two-phase first; the lost end is
// created by that change.
func (m *Manager) restore(ctx context.Context, d Pair, add func(context.Context, Pair) error) error {
	k, ok := m.keys.current(d.ID)
	if !ok {
		if err := m.changeKey(ctx, d, false); err != nil {
			return err
		}
		k, _ = m.keys.current(d.ID)
	}
	d.Key = k
	return add(ctx, d)
}
