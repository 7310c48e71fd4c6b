package seal

import (
	"math"
	"time"
)

// Tick tells the channel the owner's time (any origin; a time before the
// latest one given is taken as the latest). The previous receive key
// retires once PreviousGraceTime has passed since the first frame under
// the current one, even if fewer than PreviousGrace frames came since: on
// a pair that carries only keepalives a rekey or key change then completes
// within that time. Call it before Open with the frame's arrival time, and
// at Deadline.
func (c *Channel) Tick(now time.Duration) {
	c.now = max(c.now, now)
	if c.prev != nil && c.now-c.curSince >= c.cfg.PreviousGraceTime {
		c.retirePrevious()
	}
}

// Deadline returns when Tick retires the previous receive key, and false
// when none is open.
func (c *Channel) Deadline() (time.Duration, bool) {
	if c.prev == nil {
		return 0, false
	}
	if c.curSince > math.MaxInt64-c.cfg.PreviousGraceTime {
		return math.MaxInt64, true
	}
	return c.curSince + c.cfg.PreviousGraceTime, true
}

// retirePrevious forgets the previous receive key: frames of its epoch
// are refused (ErrUnknownEpoch) from now on, and the echo moves up to the
// current epoch, which lets the peer move on.
func (c *Channel) retirePrevious() {
	c.prev.aead = nil
	c.prev = nil
	c.ctr.PreviousRetired++
}
