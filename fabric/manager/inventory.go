package manager

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/fabric/store"
)

// Inventory changes apply to the pool, then to the store; if the store
// fails, the pool change is undone, so the two never disagree.

// RegisterBox adds or replaces a box (a GPU-side bridge reporting itself, or
// an operator). A lent GPU reported unhealthy goes through SetGPUHealth, so
// its host gets the surprise removal. A box with an agent_url gets an agent
// credential (AgentCredential).
func (m *Manager) RegisterBox(ctx context.Context, b pool.Box) (pool.Box, error) {
	nb, _, err := m.enrolBox(ctx, b)
	return nb, err
}

// enrolBox is RegisterBox, also returning the agent's credential.
func (m *Manager) enrolBox(ctx context.Context, b pool.Box) (pool.Box, string, error) {
	p, err := m.livePool()
	if err != nil {
		return pool.Box{}, "", err
	}
	if err := m.checkAgentURL(b.AgentURL); err != nil {
		return pool.Box{}, "", err
	}
	if err := checkAgentBridge(b.AgentURL, b.Bridge); err != nil {
		return pool.Box{}, "", err
	}
	var failed []string
	b.GPUs = slices.Clone(b.GPUs)
	for i, g := range b.GPUs {
		if cur, err := p.GPU(g.ID); err == nil && cur.Box == b.ID && cur.Allocation != "" && g.Health == pool.Unhealthy {
			b.GPUs[i].Health = cur.Health
			failed = append(failed, g.ID)
		}
	}
	nb, cred, err := m.registerBox(ctx, p, b)
	if err != nil {
		return pool.Box{}, "", err
	}
	for _, id := range failed {
		if _, err := m.SetGPUHealth(ctx, id, pool.Unhealthy); err != nil {
			return pool.Box{}, "", fmt.Errorf("manager: box %s reports gpu %s failed: %w", b.ID, id, err)
		}
	}
	if len(failed) > 0 {
		nb, err = p.Box(b.ID)
	}
	return nb, cred, err
}

func (m *Manager) registerBox(ctx context.Context, p *pool.Pool, b pool.Box) (pool.Box, string, error) {
	m.inv.Lock()
	defer m.inv.Unlock()
	old, oldErr := p.Box(b.ID)
	nb, err := p.AddBox(b)
	if err != nil {
		return pool.Box{}, "", err
	}
	undo := func() {
		if oldErr == nil {
			p.AddBox(old)
		} else {
			p.RemoveBox(nb.ID)
		}
	}
	ac, has, credOp, err := m.credFor(BridgeBox, nb.ID, nb.AgentURL)
	if err != nil {
		undo()
		return pool.Box{}, "", err
	}
	if err := m.cfg.Store.Apply(ctx, putJSON(boxKey(nb.ID), storedBox(nb)), credOp); err != nil {
		undo()
		return pool.Box{}, "", fmt.Errorf("manager: persist box: %w", err)
	}
	m.creds.set(BridgeBox, nb.ID, ac, has)
	m.events.add(Event{Type: EventBoxRegistered, Box: nb.ID})
	return nb, ac.Credential, nil
}

// RemoveBox forgets a box whose GPUs are all free.
func (m *Manager) RemoveBox(ctx context.Context, id string) (pool.Box, error) {
	p, err := m.livePool()
	if err != nil {
		return pool.Box{}, err
	}
	m.inv.Lock()
	defer m.inv.Unlock()
	var ops []store.Op
	var rtts []pool.RTT
	for _, r := range p.RTTs() {
		if r.Box == id {
			rtts = append(rtts, r)
			ops = append(ops, store.Delete(rttKey(r.Host, r.Box)))
		}
	}
	b, err := p.RemoveBox(id)
	if err != nil {
		return pool.Box{}, err
	}
	if err := m.cfg.Store.Apply(ctx, append(ops, store.Delete(boxKey(id)), store.Delete(credKey(BridgeBox, id)))...); err != nil {
		p.AddBox(b)
		for _, r := range rtts {
			p.SetRTT(r)
		}
		return pool.Box{}, fmt.Errorf("manager: persist box removal: %w", err)
	}
	m.creds.set(BridgeBox, id, agentCred{}, false)
	m.events.add(Event{Type: EventBoxRemoved, Box: id})
	return b, nil
}

// RegisterHost adds or replaces a host. A host with an agent_url gets an
// agent credential (AgentCredential).
func (m *Manager) RegisterHost(ctx context.Context, h pool.Host) (pool.Host, error) {
	nh, _, err := m.enrolHost(ctx, h)
	return nh, err
}

// enrolHost is RegisterHost, also returning the agent's credential.
func (m *Manager) enrolHost(ctx context.Context, h pool.Host) (pool.Host, string, error) {
	p, err := m.livePool()
	if err != nil {
		return pool.Host{}, "", err
	}
	if err := m.checkAgentURL(h.AgentURL); err != nil {
		return pool.Host{}, "", err
	}
	if err := checkAgentBridge(h.AgentURL, h.Bridge); err != nil {
		return pool.Host{}, "", err
	}
	m.inv.Lock()
	defer m.inv.Unlock()
	old, oldErr := p.Host(h.ID)
	nh, err := p.AddHost(h)
	if err != nil {
		return pool.Host{}, "", err
	}
	undo := func() {
		if oldErr == nil {
			p.AddHost(old)
		} else {
			p.RemoveHost(nh.ID)
		}
	}
	ac, has, credOp, err := m.credFor(BridgeHost, nh.ID, nh.AgentURL)
	if err != nil {
		undo()
		return pool.Host{}, "", err
	}
	if err := m.cfg.Store.Apply(ctx, putJSON(hostKey(nh.ID), storedHost(nh)), credOp); err != nil {
		undo()
		return pool.Host{}, "", fmt.Errorf("manager: persist host: %w", err)
	}
	m.creds.set(BridgeHost, nh.ID, ac, has)
	m.events.add(Event{Type: EventHostRegistered, Host: nh.ID})
	return nh, ac.Credential, nil
}

// RemoveHost forgets a host that holds no GPUs.
func (m *Manager) RemoveHost(ctx context.Context, id string) (pool.Host, error) {
	p, err := m.livePool()
	if err != nil {
		return pool.Host{}, err
	}
	m.inv.Lock()
	defer m.inv.Unlock()
	var ops []store.Op
	var rtts []pool.RTT
	for _, r := range p.RTTs() {
		if r.Host == id {
			rtts = append(rtts, r)
			ops = append(ops, store.Delete(rttKey(r.Host, r.Box)))
		}
	}
	h, err := p.RemoveHost(id)
	if err != nil {
		return pool.Host{}, err
	}
	if err := m.cfg.Store.Apply(ctx, append(ops, store.Delete(hostKey(id)), store.Delete(credKey(BridgeHost, id)))...); err != nil {
		p.AddHost(h)
		for _, r := range rtts {
			p.SetRTT(r)
		}
		return pool.Host{}, fmt.Errorf("manager: persist host removal: %w", err)
	}
	m.creds.set(BridgeHost, id, agentCred{}, false)
	m.events.add(Event{Type: EventHostRemoved, Host: id})
	return h, nil
}

// SetRTT records a measured RTT between a host bridge and a box bridge.
func (m *Manager) SetRTT(ctx context.Context, r pool.RTT) error {
	p, err := m.livePool()
	if err != nil {
		return err
	}
	m.inv.Lock()
	defer m.inv.Unlock()
	if err := p.SetRTT(r); err != nil {
		return err
	}
	if err := m.cfg.Store.Apply(ctx, putJSON(rttKey(r.Host, r.Box), r)); err != nil {
		return fmt.Errorf("manager: persist rtt: %w", err)
	}
	return nil
}

// Drain stops (on) or resumes (off) new allocations on a box and lists the
// allocations that still hold its GPUs.
func (m *Manager) Drain(ctx context.Context, box string, on bool) (pool.Box, []string, error) {
	p, err := m.livePool()
	if err != nil {
		return pool.Box{}, nil, err
	}
	m.inv.Lock()
	defer m.inv.Unlock()
	old, err := p.Box(box)
	if err != nil {
		return pool.Box{}, nil, err
	}
	b, allocs, err := p.SetDraining(box, on)
	if err != nil {
		return pool.Box{}, nil, err
	}
	if err := m.cfg.Store.Apply(ctx, putJSON(boxKey(box), storedBox(b))); err != nil {
		p.SetDraining(box, old.Draining)
		return pool.Box{}, nil, fmt.Errorf("manager: persist drain: %w", err)
	}
	if on != old.Draining {
		typ := EventBoxUndrained
		if on {
			typ = EventBoxDrained
		}
		m.events.add(Event{Type: typ, Box: box})
	}
	return b, allocs, nil
}

// SetGPUHealth marks a GPU healthy or unhealthy. A failed GPU that was lent
// leaves its allocation; its host gets a surprise-removal event and the
// pair is torn down. No other GPU is touched.
func (m *Manager) SetGPUHealth(ctx context.Context, gpu string, h pool.Health) (pool.HealthChange, error) {
	p, err := m.livePool()
	if err != nil {
		return pool.HealthChange{}, err
	}
	m.inv.Lock()
	locked := true
	defer func() {
		if locked {
			m.inv.Unlock()
		}
	}()
	before, err := p.GPU(gpu)
	if err != nil {
		return pool.HealthChange{}, err
	}
	var pair []Pair
	if before.Allocation != "" && h == pool.Unhealthy {
		a, err := p.Allocation(before.Allocation)
		if err != nil {
			return pool.HealthChange{}, err
		}
		all, err := m.pairsOf(p, a)
		if err != nil {
			return pool.HealthChange{}, err
		}
		for _, pr := range all {
			if pr.GPU == gpu {
				pair = append(pair, pr)
			}
		}
	}
	ch, err := p.SetHealth(gpu, h)
	if err != nil {
		return pool.HealthChange{}, err
	}
	ops := []store.Op{putJSON(boxKey(ch.Box.ID), storedBox(ch.Box))}
	if ch.Alloc != nil {
		ops = append(ops, putJSON(allocKey(ch.Alloc.ID), *ch.Alloc))
	}
	if err := m.cfg.Store.Apply(ctx, ops...); err != nil {
		// The GPU is broken whatever the store says; keep the pool's view
		// and let the error surface. A restart re-reads the store.
		return ch, fmt.Errorf("manager: persist gpu health: %w", err)
	}
	if h == pool.Unhealthy {
		m.metrics.gpuFailures.Inc()
		if ch.Alloc != nil {
			m.log.Warn("gpu failed; surprise removal", "gpu", gpu, "allocation", ch.Alloc.ID, "host", ch.Alloc.Host)
			port := ch.Lost.HostPort
			m.events.add(Event{Type: EventGPUFailed, Allocation: ch.Alloc.ID, Host: ch.Alloc.Host, Box: ch.Box.ID,
				GPUs: []string{gpu}, Pair: ch.Lost.Pair, HostPort: &port})
		} else {
			m.log.Warn("gpu marked unhealthy", "gpu", gpu)
		}
	}
	if ch.Alloc == nil && before.Health != h {
		healthy := h == pool.Healthy
		m.events.add(Event{Type: EventGPUHealth, Box: ch.Box.ID, GPUs: []string{gpu}, Healthy: &healthy})
	}
	// Agents are slow; other inventory changes need not wait for them.
	m.inv.Unlock()
	locked = false
	if len(pair) == 1 {
		pr := pair[0]
		uctx := context.WithoutCancel(ctx)
		sctx, cancel := context.WithTimeout(uctx, m.cfg.StepTimeout)
		serr := m.cfg.HostBridge.SurpriseRemove(sctx, pr)
		cancel()
		// The host already knows; tear down the rest of the pair so no
		// frame reaches the dead GPU's slot. HotRemove is skipped: the
		// surprise removal replaced it.
		var terr error
		for _, s := range []Step{StepHostBridge, StepSwitch, StepGPUBridge} {
			terr = errors.Join(terr, m.undo(uctx, s, pr))
		}
		if err := errors.Join(serr, terr); err != nil {
			m.log.Warn("gpu failure: tearing down its pair left errors; the reconciler will retry", "gpu", gpu, "pair", pr.ID, "err", err)
		}
	}
	return ch, nil
}
