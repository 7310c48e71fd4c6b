package manager

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dxpu/dxpu/fabric/pool"
)

// Box agent reachability. The reconciler asks every box agent for its
// pairs (AgentPairLister); a box whose agent fails every such call for
// longer than Config.UnreachableAfter is reported: the box and its GPUs
// carry "unreachable" (since, reason) in the API's answers, allocations
// holding its GPUs are degraded with that reason, the event
// box_unreachable is emitted and dxpu_boxes_unreachable counts it. The
// first answer again clears it (box_reachable). Nothing else follows: an
// agent that does not answer says nothing about the GPUs (its management
// network, its process or the manager's path may be what failed), so no
// GPU is marked unhealthy, taken back or removed from its host for it.
// The state is the leader's, rebuilt by its own reconciliations.

// DefaultUnreachableAfter is how long a box agent may fail to answer
// before its box is reported unreachable.
const DefaultUnreachableAfter = 30 * time.Second

type boxReach struct {
	since    time.Time // first failure of the run
	reason   string    // the latest failure
	reported bool
}

type reachState struct {
	mu    sync.Mutex
	boxes map[string]*boxReach
}

func newReachState() *reachState { return &reachState{boxes: map[string]*boxReach{}} }

// agentUnanswered records a failed call to the agent of boxes; a run of
// failures longer than the bound reports them, once.
func (m *Manager) agentUnanswered(boxes []string, agent string, err error) {
	now := time.Now()
	var report []pool.Unreachable
	var ids []string
	rs := m.reach
	rs.mu.Lock()
	for _, id := range boxes {
		r, ok := rs.boxes[id]
		if !ok {
			r = &boxReach{since: now}
			rs.boxes[id] = r
		}
		r.reason = fmt.Sprintf("agent %s does not answer: %v", agent, err)
		if !r.reported && now.Sub(r.since) >= m.cfg.UnreachableAfter {
			r.reported = true
			u := r.unreachable(id)
			report, ids = append(report, u), append(ids, id)
			// Before the state shows: the API reads it under rs.mu.
			m.events.add(Event{Type: EventBoxUnreachable, Box: id, Reason: u.Reason})
		}
	}
	rs.mu.Unlock()
	for i, u := range report {
		id := ids[i]
		m.log.Warn("box agent unreachable; its GPUs stay lent and healthy", "box", id, "since", u.Since, "reason", u.Reason)
	}
}

// agentAnswered clears the failures of boxes' agent.
func (m *Manager) agentAnswered(boxes []string, agent string) {
	rs := m.reach
	rs.mu.Lock()
	var back []string
	for _, id := range boxes {
		if r, ok := rs.boxes[id]; ok {
			if r.reported {
				back = append(back, id)
				m.events.add(Event{Type: EventBoxReachable, Box: id, Reason: "agent " + agent + " answers again"})
			}
			delete(rs.boxes, id)
		}
	}
	rs.mu.Unlock()
	for _, id := range back {
		m.log.Info("box agent answers again", "box", id, "agent", agent)
	}
}

// boxUnreachable reports whether box id is reported unreachable, and how.
func (m *Manager) boxUnreachable(id string) (pool.Unreachable, bool) {
	rs := m.reach
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r, ok := rs.boxes[id]
	if !ok || !r.reported {
		return pool.Unreachable{}, false
	}
	return r.unreachable(id), true
}

// unreachable says how box id is unreachable, as the API answers it.
func (r *boxReach) unreachable(id string) pool.Unreachable {
	return pool.Unreachable{Since: r.since, Reason: fmt.Sprintf("box %s: %s (since %s)", id, r.reason, r.since.UTC().Format(time.RFC3339))}
}

// unreachableBoxes counts the boxes reported unreachable.
func (m *Manager) unreachableBoxes() int {
	rs := m.reach
	rs.mu.Lock()
	defer rs.mu.Unlock()
	n := 0
	for _, r := range rs.boxes {
		if r.reported {
			n++
		}
	}
	return n
}

// withReach marks b and its GPUs as the API answers them.
func (m *Manager) withReach(b pool.Box) pool.Box {
	u, ok := m.boxUnreachable(b.ID)
	if !ok {
		return b
	}
	b.Unreachable = &u
	b.GPUs = slices.Clone(b.GPUs)
	for i := range b.GPUs {
		b.GPUs[i].Unreachable = &u
	}
	return b
}

// withGPUReach marks g when its box is reported unreachable.
func (m *Manager) withGPUReach(g pool.GPU) pool.GPU {
	if u, ok := m.boxUnreachable(g.Box); ok {
		g.Unreachable = &u
	}
	return g
}
