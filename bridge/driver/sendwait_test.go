package driver_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// waitingContext is a context that closes waiting the first time its
// Done channel is asked for. SendWait asks only once the runner refused
// it and it waits (for progress, a retry, or its end): a test sees it
// waiting without giving it time to get there.
type waitingContext struct {
	context.Context
	once    sync.Once
	waiting chan struct{}
}

func newWaitingContext(ctx context.Context) *waitingContext {
	return &waitingContext{Context: ctx, waiting: make(chan struct{})}
}

func (c *waitingContext) Done() <-chan struct{} {
	c.once.Do(func() { close(c.waiting) })
	return c.Context.Done()
}

// TestSendWaitWaitsForLink: SendWait before the link is up waits for it.
// The GPU runner starts only once SendWait was refused and waits: a
// SendWait that returned the refusal instead (ErrNotUp is a reason to
// wait, like ErrBusy) fails it.
func TestSendWaitWaitsForLink(t *testing.T) {
	t.Parallel()
	a, b := newPipes()
	h, g := newRunner(t, quietConfig(bridge.RoleHost), a), newRunner(t, quietConfig(bridge.RoleGPU), b)
	var w writes
	g.OnTLP = w.onTLP
	startRun(t, h)
	ctx := newWaitingContext(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- driver.SendWait(ctx, h, write(t, 0)) }()
	select {
	case <-ctx.waiting:
	case err := <-errc:
		t.Fatalf("SendWait with the link down returned %v, want it to wait for the link", err)
	case <-time.After(waitfor.Stall):
		t.Fatalf("SendWait neither waited nor returned within %v", waitfor.Stall)
	}
	startRun(t, g)
	if err := <-errc; err != nil {
		t.Fatalf("SendWait: %v", err)
	}
	waitLen(t, &w, 1)
}

// TestSendWaitStopsWithContext: a SendWait refused until its context
// ends returns then, with the refusal.
func TestSendWaitStopsWithContext(t *testing.T) {
	t.Parallel()
	_, b := newPipes()
	h := newRunner(t, quietConfig(bridge.RoleHost), b)
	startRun(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := returnsWithin(t, "SendWait", func() error { return driver.SendWait(ctx, h, write(t, 0)) })
	if !errors.Is(err, bridge.ErrNotUp) {
		t.Fatalf("SendWait: %v, want the ErrNotUp it waited on", err)
	}
}

// TestSendManyWaitSendsEachOnce: SendManyWait over a bridge that takes a
// few at a time sends every TLP once: one that handed the bridge again
// the TLPs it took before a refusal fails it. The bridge counts what it
// took (TLPsFromLocal); once the GPU delivered that many, every copy is
// in, and the deliveries must be the n writes once each, in order.
func TestSendManyWaitSendsEachOnce(t *testing.T) {
	t.Parallel()
	cfg := func(role bridge.Role) bridge.Config {
		c := quietConfig(role)
		c.Window, c.TxQueue = 8, 8
		return c
	}
	a, b := newPipes()
	h, g := newRunner(t, cfg(bridge.RoleHost), a), newRunner(t, cfg(bridge.RoleGPU), b)
	var w writes
	g.OnTLP = w.onTLP
	startRun(t, h)
	startRun(t, g)
	waitUp(t, h, g)
	const n = 200
	tlps := make([][]byte, n)
	for i := range tlps {
		tlps[i] = write(t, i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := driver.SendManyWait(ctx, h, tlps); err != nil {
		t.Fatal(err)
	}
	taken := h.Counters().TLPsFromLocal
	waitfor.Progress(t, "every TLP the host's bridge took delivered", func() (bool, uint64) {
		d := g.Counters().TLPsDelivered
		return d >= taken, d
	})
	if got := w.list(); taken != n || !slices.Equal(got, seq(n)) {
		t.Fatalf("the bridge took %d TLPs for %d writes; delivered %d, not each once in order (first %v)", taken, n, len(got), got[:min(len(got), 20)])
	}
}
