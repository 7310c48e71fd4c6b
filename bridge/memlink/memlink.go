// Package memlink is an in-memory, one-way link between two bridges with
// fault injection: loss, duplication, reordering, corruption, delay,
// bandwidth limit, and link down/up. It runs on any clock: the virtual-time
// simulator (package sim) for deterministic tests, or wall-clock time.
//
// This kernel has no netem; this link is how the bridge's fault handling is
// tested.
package memlink

import (
	"math/rand/v2"
	"time"
)

// Clock schedules callbacks; *sim.Sim satisfies it through SimClock, and
// WallClock runs on real time.
type Clock interface {
	Now() time.Duration
	After(d time.Duration, fn func())
}

// Faults configures a link. Probabilities are per frame, in [0, 1].
type Faults struct {
	Loss      float64
	Duplicate float64
	// Reorder holds a frame back by ReorderDelay so that later frames
	// overtake it (driver.Faulty lets it go as soon as the next frame has,
	// ReorderDelay at the latest).
	Reorder      float64
	ReorderDelay time.Duration // default Delay + ReorderSlack (5 us)
	// Corrupt flips one random bit. The receiving NIC's frame check
	// sequence catches it and the frame is dropped, as on real Ethernet,
	// unless PassCorrupt is set.
	Corrupt     float64
	PassCorrupt bool
	// Delay is the one-way propagation delay.
	Delay time.Duration
	// Bandwidth in bits per second serializes frames (0: unlimited);
	// QueueBytes bounds the transmit queue (default 4 MiB), beyond which
	// frames are tail-dropped.
	Bandwidth  float64
	QueueBytes int
}

// Stats counts what the link did.
type Stats struct {
	Sent, Delivered, Lost, Duplicated, Reordered, Corrupted, QueueDrops, DownDrops uint64
	Bytes                                                                          uint64
}

// ReorderSlack is how much longer than Delay a frame held back for
// reordering waits when ReorderDelay is 0.
const ReorderSlack = 5 * time.Microsecond

// WithDefaults returns f with its zero ReorderDelay and QueueBytes filled
// in: the defaults of the virtual-time Link and of the real-time
// driver.Faulty alike (which has no byte-bounded queue: QueueBytes is the
// Link's).
func (f Faults) WithDefaults() Faults {
	if f.ReorderDelay == 0 {
		f.ReorderDelay = f.Delay + ReorderSlack
	}
	if f.QueueBytes == 0 {
		f.QueueBytes = 4 << 20
	}
	return f
}

// Link is a one-way link. Send never blocks; frames arrive through the
// deliver callback on the clock's goroutine.
type Link struct {
	clk       Clock
	dice      Dice
	deliver   func([]byte)
	down      bool
	busyUntil time.Duration
	queued    int
	free      [][]byte
	Stats     Stats
}

// New returns a link that hands frames to deliver. rng drives the faults
// (use the simulator's source for reproducible runs).
func New(clk Clock, rng *rand.Rand, f Faults, deliver func([]byte)) *Link {
	l := &Link{clk: clk, deliver: deliver}
	l.dice = Dice{F: f.WithDefaults(), Rng: rng, Stats: &l.Stats}
	return l
}

// SetFaults changes the faults from now on.
func (l *Link) SetFaults(f Faults) { l.dice.F = f.WithDefaults() }

// SetDown takes the link down (every frame is lost, frames in flight
// included) or brings it back up.
func (l *Link) SetDown(down bool) { l.down = down }

// Down reports whether the link is down.
func (l *Link) Down() bool { return l.down }

func (l *Link) buffer(b []byte) []byte {
	var c []byte
	if n := len(l.free); n > 0 {
		c = l.free[n-1][:0]
		l.free = l.free[:n-1]
	}
	return append(c, b...)
}

// Send puts a copy of frame on the link.
func (l *Link) Send(frame []byte) {
	if !l.dice.Offer(len(frame), l.down) {
		return
	}
	f := &l.dice.F
	now := l.clk.Now()
	start := now
	var ser time.Duration
	if f.Bandwidth > 0 {
		if l.queued+len(frame) > f.QueueBytes {
			l.Stats.QueueDrops++
			return
		}
		if l.busyUntil > start {
			start = l.busyUntil
		}
		ser = time.Duration(float64(len(frame)*8) / f.Bandwidth * 1e9)
		l.busyUntil = start + ser
	}
	for copies := l.dice.Copies(); copies > 0; copies-- {
		at := start + ser + f.Delay
		if l.dice.Reorder() {
			at += f.ReorderDelay
		}
		c := l.buffer(frame)
		bad := l.dice.Corrupt(c)
		n := len(c)
		l.queued += n
		l.clk.After(at-now, func() {
			l.queued -= n
			switch {
			case l.down:
				l.Stats.DownDrops++
			case bad && !l.dice.F.PassCorrupt:
				// Dropped by the receiver's FCS check.
			default:
				l.Stats.Delivered++
				l.deliver(c)
			}
			l.free = append(l.free, c)
		})
	}
}
