package pcie

import (
	"sync"
	"time"

	"github.com/dxpu/dxpu/sim"
)

// RunUntil runs the events of s up to virtual time t and leaves the clock
// at t (or later, if t is in the past). Unlike sim.Run it never runs an
// event after t: sim.Run can, when the earliest pending event was
// cancelled, because Step skips cancelled events and then runs the next
// live one whatever its time. A sentinel event at t bounds the walk. It
// returns the number of events run, the sentinel not counted.
func RunUntil(s *sim.Sim, t time.Duration) uint64 {
	if t <= s.Now() {
		return 0
	}
	before := s.Steps()
	m := sentinels.Get().(*sentinel)
	m.reached = false
	s.At(t, m.reachF)
	s.RunWhile(m.pendingF, 0)
	sentinels.Put(m)
	return s.Steps() - before - 1
}

// sentinel marks the moment RunUntil runs to. Sentinels are pooled, with
// their method values made once, so RunUntil allocates nothing; a pool,
// not one per simulator, because RunUntil may run inside an event of an
// outer RunUntil.
type sentinel struct {
	reached  bool
	reachF   func()
	pendingF func() bool
}

func (m *sentinel) reach()        { m.reached = true }
func (m *sentinel) pending() bool { return !m.reached }

var sentinels = sync.Pool{New: func() any {
	m := &sentinel{}
	m.reachF, m.pendingF = m.reach, m.pending
	return m
}}
