package driver

import (
	"errors"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// QueuedSender hands TLPs from inside a simulation (an emulated GPU or
// host) to a Runner, keeping them in order in a queue while the bridge
// pushes back (ErrBusy) or is not up yet, and retrying every 20 µs of the
// simulation's time. The queue's length is the backlog that the emulated
// engines pace themselves by. Use it from the simulation's goroutine only.
type QueuedSender struct {
	s       *sim.Sim
	r       *Runner
	backlog [][]byte
	armed   bool
}

// NewQueuedSender returns a sender to r that retries on s.
func NewQueuedSender(s *sim.Sim, r *Runner) *QueuedSender { return &QueuedSender{s: s, r: r} }

func refused(err error) bool {
	return errors.Is(err, bridge.ErrBusy) || errors.Is(err, bridge.ErrNotUp)
}

// SendTLP sends v now if nothing waits before it, else queues a copy.
func (s *QueuedSender) SendTLP(v tlp.View) {
	if len(s.backlog) == 0 {
		if err := s.r.Send(v); !refused(err) {
			return // sent, or malformed (counted by the bridge)
		}
	}
	s.backlog = append(s.backlog, append([]byte(nil), v...))
	s.retry()
}

func (s *QueuedSender) retry() {
	if s.armed {
		return
	}
	s.armed = true
	s.s.After(20*time.Microsecond, func() {
		s.armed = false
		for len(s.backlog) > 0 {
			if refused(s.r.Send(s.backlog[0])) {
				s.retry()
				return
			}
			s.backlog[0] = nil
			s.backlog = s.backlog[1:]
		}
	})
}

// Backlog estimates the queueing in front of the bridge: 100 ns a TLP.
func (s *QueuedSender) Backlog() time.Duration {
	return time.Duration(len(s.backlog)) * 100 * time.Nanosecond
}
