// Package driver runs a sans-I/O bridge on real time: a Transport (UDP,
// AF_PACKET, or an in-memory link) carries frames, a timer serves the
// bridge's deadline, and the local PCIe side hands TLPs in with Send and
// gets TLPs and events through callbacks.
//
// Everything that touches the bridge holds one mutex; callbacks run with it
// held and must not call back into the Runner (queue work for another
// goroutine instead).
package driver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/tlp"
)

// Transport carries dxpu frames (from the dxpu header on) to the peer.
type Transport interface {
	// Send transmits one frame; the slice is not kept.
	Send(frame []byte) error
	// Recv blocks for the next frame from the peer and returns its length.
	Recv(buf []byte) (int, error)
	// Close unblocks Recv and releases the transport.
	Close() error
}

// ErrClosed is returned by Send after Run returned.
var ErrClosed = errors.New("driver: runner stopped")

// Runner drives one bridge.
type Runner struct {
	// OnTLP receives TLPs for the local PCIe side; the View is valid during
	// the call only. Credits are released when it returns unless
	// ManualRelease is set.
	OnTLP func(tlp.View)
	// OnEvent receives the bridge's events.
	OnEvent func(bridge.Event)
	// ManualRelease: the PCIe side calls Release itself.
	ManualRelease bool
	// Accept selects the classes OnTLP takes (default all).
	Accept bridge.ClassMask

	mu      sync.Mutex
	b       *bridge.Bridge
	t       Transport
	start   time.Time
	frame   []byte
	timer   *time.Timer
	timerAt time.Duration
	closed  bool
	// SendErrors counts frames the transport failed to send.
	SendErrors uint64
	// LastFrameError is the latest reason the bridge dropped a frame.
	LastFrameError error
	// Progress is signalled (non-blocking) whenever the bridge accepted
	// acknowledgements or credits, so a producer that got ErrBusy can
	// retry.
	Progress chan struct{}
}

// New returns a runner for b over t. Call Run to start it.
func New(b *bridge.Bridge, t Transport) *Runner {
	return &Runner{b: b, t: t, start: time.Now(), frame: make([]byte, 65536), Accept: bridge.AcceptAll, Progress: make(chan struct{}, 1)}
}

// Now returns the runner's clock: time since New.
func (r *Runner) Now() time.Duration { return time.Since(r.start) }

// Bridge returns the bridge; hold no reference across goroutines, use
// Counters and State instead.
func (r *Runner) Counters() bridge.Counters {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.b.Counters()
}

// FrameError returns the latest reason a received frame was dropped.
func (r *Runner) FrameError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.LastFrameError
}

// State returns the bridge's link state.
func (r *Runner) State() bridge.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.b.State()
}

// Pending returns the TLPs the bridge holds unacknowledged.
func (r *Runner) Pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.b.Pending()
}

// Send hands a TLP from the local PCIe side to the bridge (see
// Bridge.HandleTLP for ErrBusy and ErrNotUp).
func (r *Runner) Send(t []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	err := r.b.HandleTLP(r.Now(), t)
	if err == nil {
		r.flush()
	}
	return err
}

// SendMany hands several TLPs over under one lock and sends them in as few
// frames as the MTU allows. It returns how many were taken; on an error
// the rest were not.
func (r *Runner) SendMany(tlps [][]byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, ErrClosed
	}
	now := r.Now()
	for i, t := range tlps {
		if err := r.b.HandleTLP(now, t); err != nil {
			if i > 0 {
				r.flush()
			}
			return i, err
		}
	}
	r.flush()
	return len(tlps), nil
}

// Release returns credits (ManualRelease).
func (r *Runner) Release(c tlp.Class, headers, data int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.b.Release(c, headers, data)
	r.flush()
	return err
}

// Reset asks the bridge for an explicit session reset.
func (r *Runner) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.b.Reset(r.Now())
	r.flush()
}

// Run receives frames and serves timers until ctx ends or the transport
// fails; it closes the transport on return.
func (r *Runner) Run(ctx context.Context) error {
	r.mu.Lock()
	r.timer = time.AfterFunc(time.Hour, r.onTimer)
	r.timerAt = bridge.NoDeadline
	r.flush()
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
		}
		r.mu.Lock()
		r.closed = true
		r.timer.Stop()
		r.mu.Unlock()
		r.t.Close()
	}()
	defer close(done)
	buf := make([]byte, 65536)
	for {
		n, err := r.t.Recv(buf)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("driver: receive: %w", err)
		}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return ctx.Err()
		}
		if err := r.b.HandleFrame(r.Now(), buf[:n]); err != nil {
			r.LastFrameError = err
		} else {
			select {
			case r.Progress <- struct{}{}:
			default:
			}
		}
		r.flush()
		r.mu.Unlock()
	}
}

func (r *Runner) onTimer() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.timerAt = bridge.NoDeadline
	r.b.HandleTimeout(r.Now())
	r.flush()
}

// flush sends due frames, delivers TLPs and events, and re-arms the timer.
// Called with mu held.
func (r *Runner) flush() {
	for again := true; again; {
		again = false
		now := r.Now()
		for {
			n := r.b.NextFrame(now, r.frame)
			if n == 0 {
				break
			}
			if err := r.t.Send(r.frame[:n]); err != nil {
				r.SendErrors++
			}
		}
		for {
			v, ok := r.b.NextTLP(r.Accept)
			if !ok {
				break
			}
			cls, dc := v.Class(), v.DataCredits()
			if r.OnTLP != nil {
				r.OnTLP(v)
			}
			if !r.ManualRelease && !r.b.Config().AutoRelease {
				_ = r.b.Release(cls, 1, dc)
			}
			again = true
		}
		for {
			e, ok := r.b.NextEvent()
			if !ok {
				break
			}
			if r.OnEvent != nil {
				r.OnEvent(e)
			}
		}
	}
	if r.timer == nil {
		return
	}
	d := r.b.Deadline()
	if d == bridge.NoDeadline {
		return
	}
	if d != r.timerAt {
		r.timerAt = d
		r.timer.Reset(max(d-r.Now(), 0))
	}
}
