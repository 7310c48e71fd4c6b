package driver

import (
	"context"
	"errors"
	"testing"

	"github.com/dxpu/dxpu/tlp"
)

// TestTLPQueueOrderAndCopies: TLPs come out in the order pushed, as copies
// (the runner reuses the view after OnTLP returns), and a serve error ends
// Serve with that error.
func TestTLPQueueOrderAndCopies(t *testing.T) {
	t.Parallel()
	q := NewTLPQueue()
	buf := make([]byte, 4)
	const n = 1000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			buf[0], buf[1] = byte(i>>8), byte(i)
			q.Push(tlp.View(buf))
		}
	}()
	stop := errors.New("enough")
	next := 0
	err := q.Serve(context.Background(), func(b []byte) error {
		if got := int(b[0])<<8 | int(b[1]); got != next {
			t.Fatalf("TLP %d served as number %d", got, next)
		}
		next++
		if next == n {
			return stop
		}
		return nil
	})
	<-done
	if !errors.Is(err, stop) || next != n {
		t.Fatalf("Serve returned %v after %d TLPs, want the serve error after %d", err, next, n)
	}
}

// TestTLPQueueStopsWithContext: an idle Serve returns nil when its context
// ends.
func TestTLPQueueStopsWithContext(t *testing.T) {
	t.Parallel()
	q := NewTLPQueue()
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() { res <- q.Serve(ctx, func([]byte) error { return nil }) }()
	cancel()
	if err := <-res; err != nil {
		t.Fatalf("Serve after cancel: %v", err)
	}
}

// TestTLPQueueRecyclesBuffers: once warm, pushing and serving allocate
// nothing per TLP: a queue that dropped the buffers it served instead of
// keeping them for the next pushes fails it.
func TestTLPQueueRecyclesBuffers(t *testing.T) {
	q := NewTLPQueue()
	v := tlp.View(make([]byte, 16+64)) // a 64-bit memory write of 64 bytes
	errStop := errors.New("stop")
	const per = 32
	served := 0
	serve := func([]byte) error {
		served++
		if served == per {
			return errStop
		}
		return nil
	}
	ctx := context.Background()
	round := func() {
		for range per {
			q.Push(v)
		}
		served = 0
		if err := q.Serve(ctx, serve); err != errStop {
			t.Fatalf("Serve: %v", err)
		}
	}
	round()
	if allocs := testing.AllocsPerRun(20, round); allocs >= per/2 {
		t.Fatalf("%v allocations per %d TLPs pushed and served", allocs, per)
	}
}

// BenchmarkTLPQueue: a push and its serve allocate nothing once warm.
func BenchmarkTLPQueue(b *testing.B) {
	q := NewTLPQueue()
	v := tlp.View(make([]byte, 16+256))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := 0
	b.ReportAllocs()
	for b.Loop() {
		q.Push(v)
		_ = q.Serve(ctx, func([]byte) error { served++; return errBenchStop })
	}
	if served == 0 {
		b.Fatal("nothing served")
	}
}

var errBenchStop = errors.New("one served")
