package switching

import "sync/atomic"

// Counters counts frames and bytes by reason. The XDP program keeps the same
// layout per CPU (struct counters); Add is safe for concurrent use.
type Counters struct {
	Packets [NumReasons]uint64
	Bytes   [NumReasons]uint64
}

// Add counts one frame of n bytes for reason r.
func (c *Counters) Add(r Reason, n int) {
	if c == nil || r >= NumReasons {
		return
	}
	atomic.AddUint64(&c.Packets[r], 1)
	atomic.AddUint64(&c.Bytes[r], uint64(n))
}

// Snapshot returns a consistent-enough copy (each field read atomically).
func (c *Counters) Snapshot() Counters {
	var s Counters
	if c == nil {
		return s
	}
	for i := range c.Packets {
		s.Packets[i] = atomic.LoadUint64(&c.Packets[i])
		s.Bytes[i] = atomic.LoadUint64(&c.Bytes[i])
	}
	return s
}

// Merge adds o into c (not atomic: for snapshots, e.g. summing per-CPU values).
func (c *Counters) Merge(o *Counters) {
	for i := range c.Packets {
		c.Packets[i] += o.Packets[i]
		c.Bytes[i] += o.Bytes[i]
	}
}

// CounterSource is what exports counters: the Go forwarder or the XDP maps.
type CounterSource interface {
	// PairCounters calls fn for every pair in the table.
	PairCounters(fn func(id uint32, c Counters)) error
	// PortCounters calls fn for every port ("" for frames on unmanaged ports).
	PortCounters(fn func(port string, c Counters)) error
}

// SumSources is a CounterSource adding up several: the XDP maps and the
// slow path's forwarder of the same switch.
type SumSources []CounterSource

// PairCounters implements CounterSource.
func (ss SumSources) PairCounters(fn func(id uint32, c Counters)) error {
	sum := map[uint32]*Counters{}
	for _, s := range ss {
		if err := s.PairCounters(func(id uint32, c Counters) {
			if sum[id] == nil {
				sum[id] = &Counters{}
			}
			sum[id].Merge(&c)
		}); err != nil {
			return err
		}
	}
	for id, c := range sum {
		fn(id, *c)
	}
	return nil
}

// PortCounters implements CounterSource.
func (ss SumSources) PortCounters(fn func(port string, c Counters)) error {
	sum := map[string]*Counters{}
	for _, s := range ss {
		if err := s.PortCounters(func(p string, c Counters) {
			if sum[p] == nil {
				sum[p] = &Counters{}
			}
			sum[p].Merge(&c)
		}); err != nil {
			return err
		}
	}
	for p, c := range sum {
		fn(p, *c)
	}
	return nil
}
