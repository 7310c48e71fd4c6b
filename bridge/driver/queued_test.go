package driver_test

import (
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// TestQueuedSenderBatch: with Batch set, TLPs wait for Flush, then leave
// in order, several to a frame; what the bridge refuses (a small window of
// credits) stays queued and goes once the runner reports progress; nothing
// is lost or reordered.
func TestQueuedSenderBatch(t *testing.T) {
	t.Parallel()
	a, b := newPipes()
	var runners [2]*driver.Runner
	for i, role := range []bridge.Role{bridge.RoleHost, bridge.RoleGPU} {
		br, err := bridge.New(testConfig(role))
		if err != nil {
			t.Fatal(err)
		}
		runners[i] = driver.New(br, []driver.Transport{batchPipe{a}, batchPipe{b}}[i])
	}
	var mu sync.Mutex
	var got []uint64
	runners[1].OnTLP = func(v tlp.View) {
		mu.Lock()
		got = append(got, binary.BigEndian.Uint64(v.Payload()))
		mu.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, r := range runners {
		wg.Add(1)
		go func() { defer wg.Done(); _ = r.Run(ctx) }()
	}
	defer func() { cancel(); wg.Wait() }()
	q := driver.NewQueuedSender(sim.New(1), runners[0])
	q.Batch = true
	const n = 3000
	data := make([]byte, 64)
	for i := range n {
		binary.BigEndian.PutUint64(data, uint64(i))
		p := tlp.Packet{Kind: tlp.MWr, Addr64: true, FirstBE: 0xf, LastBE: 0xf, Address: base + uint64(i)*64, Data: data}
		v, _ := p.AppendTo(nil)
		q.SendTLP(v)
	}
	if q.Backlog() != n*100*time.Nanosecond {
		t.Fatalf("backlog %v before Flush, want %v: SendTLP sent something", q.Backlog(), n*100*time.Nanosecond)
	}
	if c := runners[0].Counters(); c.TLPsFromLocal != 0 {
		t.Fatalf("%d TLPs reached the bridge before Flush", c.TLPsFromLocal)
	}
	// Flush until the queue drains; each pass either moves TLPs or waits
	// for the runner's progress, so no progress for 10s is a failure.
	last, since := q.Backlog(), time.Now()
	for q.Flush() {
		if bl := q.Backlog(); bl != last {
			last, since = bl, time.Now()
		} else if time.Since(since) > 10*time.Second {
			t.Fatalf("queue stuck at %v", bl)
		}
		select {
		case <-time.After(100 * time.Microsecond):
		case <-ctx.Done():
		}
	}
	for seen, since := -1, time.Now(); ; {
		mu.Lock()
		k := len(got)
		mu.Unlock()
		if k == n {
			break
		}
		if k != seen {
			seen, since = k, time.Now()
		} else if time.Since(since) > 10*time.Second {
			t.Fatalf("delivered %d of %d, nothing more for 10s", k, n)
		}
		select {
		case <-runners[0].Progress:
		case <-time.After(time.Millisecond):
		}
	}
	for i, v := range got {
		if v != uint64(i) {
			t.Fatalf("delivery %d is write %d", i, v)
		}
	}
	c := runners[0].Counters()
	if c.TLPsSent != n || c.FramesSent >= n/4 {
		t.Errorf("%d TLPs in %d frames: want all %d, several to a frame", c.TLPsSent, c.FramesSent, n)
	}
}
