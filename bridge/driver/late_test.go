package driver

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// sink is a transport that takes every frame and receives nothing until
// closed.
type sink struct {
	once sync.Once
	done chan struct{}
	sent atomic.Uint64
}

func (s *sink) Send([]byte) error { s.sent.Add(1); return nil }
func (s *sink) Recv([]byte) (int, error) {
	<-s.done
	return 0, net.ErrClosed
}
func (s *sink) Close() error { s.once.Do(func() { close(s.done) }); return nil }

// A timer held up past its deadline (here by the runner's lock, as a
// process not scheduled would) counts as late, by at least how long it
// was held up, and OnLate hears of it.
func TestLateTimerCounted(t *testing.T) {
	t.Parallel()
	b, err := bridge.New(bridge.Config{Role: bridge.RoleHost, HelloInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	tr := &sink{done: make(chan struct{})}
	r := New(b, tr)
	var heard []time.Duration
	r.OnLate = func(late time.Duration) { heard = append(heard, late) } // r.mu held
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); <-done }()

	waitfor.Until(t, "the runner sends a HELLO and arms its timer for the next", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return tr.sent.Load() > 0 && r.timer != nil && r.timerAt != bridge.NoDeadline
	})
	// Hold the runner up until well past the deadline of the timer armed
	// now. The deadline is read under the same lock as the hold: on a busy
	// machine the timer may already have fired late (and been re-armed)
	// since the wait above, and that lateness is the machine's, not the
	// hold's.
	held := 3 * LateAfter
	r.mu.Lock()
	if r.timerAt == bridge.NoDeadline {
		r.mu.Unlock()
		t.Fatal("the runner left its timer unarmed between frames")
	}
	fireAt, before := r.fireAt, r.late.Count
	for r.Now() < fireAt+held {
		time.Sleep(time.Millisecond)
	}
	r.mu.Unlock()
	waitfor.Until(t, "the held timer counted late", func() bool { return r.Lateness().Count > before })
	l := r.Lateness()
	r.mu.Lock()
	defer r.mu.Unlock()
	if l.Max < held || uint64(len(heard)) <= before || heard[before] < held {
		t.Fatalf("lateness %+v, OnLate heard %v (%d before the hold): want one of at least %v", l, heard, before, held)
	}
}

// TestLatenessKeepsMaxAndExports: the lateness record keeps the count and
// the largest lateness (not the latest), OnLate hears each, and the
// collector exports the count as the total and the largest as the max. A
// record that kept the latest lateness, counted a timer under LateAfter,
// or an exporter that left either series out, fails it.
func TestLatenessKeepsMaxAndExports(t *testing.T) {
	t.Parallel()
	b, err := bridge.New(bridge.Config{Role: bridge.RoleHost})
	if err != nil {
		t.Fatal(err)
	}
	r := New(b, nil)
	var heard []time.Duration
	r.OnLate = func(late time.Duration) { heard = append(heard, late) }
	r.mu.Lock()
	for _, late := range []time.Duration{50 * time.Millisecond, LateAfter - 1, 20 * time.Millisecond} {
		r.noteLate(late)
	}
	r.mu.Unlock()
	if l := r.Lateness(); l.Count != 2 || l.Max != 50*time.Millisecond || len(heard) != 2 {
		t.Fatalf("lateness %+v, OnLate heard %v; want 2 late, max 50ms", l, heard)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(r, nil))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		switch f.GetName() {
		case "dxpu_bridge_timer_late_total":
			got[f.GetName()] = f.Metric[0].Counter.GetValue()
		case "dxpu_bridge_timer_late_max_seconds":
			got[f.GetName()] = f.Metric[0].Gauge.GetValue()
		}
	}
	if got["dxpu_bridge_timer_late_total"] != 2 || got["dxpu_bridge_timer_late_max_seconds"] != 0.05 {
		t.Fatalf("exported %v, want total 2 and max 0.05", got)
	}
}
