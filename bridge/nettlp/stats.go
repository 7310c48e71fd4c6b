package nettlp

import "sync/atomic"

// Stats counts what a Target or Adapter did; safe for concurrent use.
type Stats struct {
	Datagrams    atomic.Uint64 // datagrams received
	Reads        atomic.Uint64 // MRd/MRdLk served with data
	Writes       atomic.Uint64 // MWr applied to memory
	BytesRead    atomic.Uint64 // bytes returned by successful reads
	BytesWritten atomic.Uint64 // bytes written by MWr
	Completions  atomic.Uint64 // completion TLPs sent
	UR           atomic.Uint64 // requests answered with Unsupported Request
	Malformed    atomic.Uint64 // datagrams or TLPs that could not be served
	Ignored      atomic.Uint64 // posted TLPs and completions the target does not use
	WritesLost   atomic.Uint64 // MWr dropped: out of range or poisoned
	SendErrors   atomic.Uint64 // datagrams the socket refused
	Refused      atomic.Uint64 // datagrams from sources the target does not answer
}

// StatsSnapshot is a plain copy of Stats.
type StatsSnapshot struct {
	Datagrams, Reads, Writes, BytesRead, BytesWritten, Completions,
	UR, Malformed, Ignored, WritesLost, SendErrors, Refused uint64
}

// Snapshot copies the counters.
func (s *Stats) Snapshot() StatsSnapshot {
	return StatsSnapshot{
		Datagrams: s.Datagrams.Load(), Reads: s.Reads.Load(), Writes: s.Writes.Load(),
		BytesRead: s.BytesRead.Load(), BytesWritten: s.BytesWritten.Load(),
		Completions: s.Completions.Load(), UR: s.UR.Load(), Malformed: s.Malformed.Load(),
		Ignored: s.Ignored.Load(), WritesLost: s.WritesLost.Load(), SendErrors: s.SendErrors.Load(), Refused: s.Refused.Load(),
	}
}
