package pcie

import (
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
	reached := false
	s.At(t, func() { reached = true })
	s.RunWhile(func() bool { return !reached }, 0)
	return s.Steps() - before - 1
}
