package memlink

import (
	"sync"
	"time"

	"github.com/dxpu/dxpu/sim"
)

// SimClock adapts the virtual-time simulator to Clock.
func SimClock(s *sim.Sim) Clock { return simClock{s} }

type simClock struct{ s *sim.Sim }

func (c simClock) Now() time.Duration               { return c.s.Now() }
func (c simClock) After(d time.Duration, fn func()) { c.s.After(d, fn) }

// WallClock runs callbacks on real time. Every callback runs with Mu held,
// so the code on both ends of a link (and anything else that takes Mu) is
// serialized.
type WallClock struct {
	Mu    sync.Mutex
	start time.Time
}

// NewWallClock returns a clock whose epoch is now.
func NewWallClock() *WallClock { return &WallClock{start: time.Now()} }

// Now returns the time since the clock's epoch.
func (c *WallClock) Now() time.Duration { return time.Since(c.start) }

// After runs fn after d, holding Mu.
func (c *WallClock) After(d time.Duration, fn func()) {
	time.AfterFunc(d, func() {
		c.Mu.Lock()
		defer c.Mu.Unlock()
		fn()
	})
}
