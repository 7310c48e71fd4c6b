package driver_test

import (
	"context"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/tlp"
)

// pollPipe is a pipe that is also a driver.Poller, shaped like a socket:
// WaitReadable reports a queued frame without taking it (the peer's Send
// signals ready), and TryRecvBatch takes what is queued.
type pollPipe struct {
	*pipe
	ready, peerReady chan struct{}
}

func newPollPipes() (*pollPipe, *pollPipe) {
	a, b := newPipes()
	ra, rb := make(chan struct{}, 1), make(chan struct{}, 1)
	return &pollPipe{a, ra, rb}, &pollPipe{b, rb, ra}
}

func (p *pollPipe) Send(f []byte) error {
	err := p.pipe.Send(f)
	select {
	case p.peerReady <- struct{}{}:
	default:
	}
	return err
}

func (p *pollPipe) TryRecvBatch(bufs [][]byte, sizes []int) (int, error) {
	k := 0
	for ; k < len(bufs); k++ {
		select {
		case <-p.done:
			return 0, errClosedPipe
		default:
		}
		select {
		case f := <-p.in:
			sizes[k] = copy(bufs[k], f)
			continue
		default:
		}
		break
	}
	return k, nil
}

func (p *pollPipe) WaitReadable() error {
	for len(p.in) == 0 {
		select {
		case <-p.ready:
		case <-p.done:
			return errClosedPipe
		}
	}
	return nil
}

var errClosedPipe = context.Canceled

// Over a Poller transport, Run's loop (take what is queued, else wait)
// delivers every write once and in order.
func TestRunnerDeliversPolled(t *testing.T) {
	t.Parallel()
	a, b := newPollPipes()
	const n = 3000
	got, _ := runPair(t, a, b, n)
	if len(got) != n {
		t.Fatalf("delivered %d, want %d", len(got), n)
	}
	for i, w := range got {
		if w != uint64(i) {
			t.Fatalf("delivery %d is write %d", i, w)
		}
	}
}

// A goroutine calling Poll takes frames while Run's goroutine waits for
// them; every write still arrives once and in order, however the two
// share the frames.
func TestPollTakesFrames(t *testing.T) {
	t.Parallel()
	a, b := newPollPipes()
	var rs [2]*driver.Runner
	for i, role := range []bridge.Role{bridge.RoleHost, bridge.RoleGPU} {
		br, err := bridge.New(testConfig(role))
		if err != nil {
			t.Fatal(err)
		}
		rs[i] = driver.New(br, []*pollPipe{a, b}[i])
	}
	if k := rs[1].Poll(); k != 0 {
		t.Fatalf("Poll before Run took %d frames", k)
	}
	var mu sync.Mutex
	var got []uint64
	rs[1].OnTLP = func(v tlp.View) {
		mu.Lock()
		got = append(got, binary.BigEndian.Uint64(v.Payload()))
		mu.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for _, r := range rs {
		wg.Add(1)
		go func() { defer wg.Done(); _ = r.Run(ctx) }()
	}
	var polled atomic.Int64
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			polled.Add(int64(rs[1].Poll()))
		}
	}()
	defer close(stop)
	waitfor.Until(t, "link up", func() bool { return rs[0].State() == bridge.StateUp && rs[1].State() == bridge.StateUp })
	const n = 2000
	data := make([]byte, 64)
	w := waitfor.NewWatch(t, "sending")
	for i := 0; i < n; {
		binary.BigEndian.PutUint64(data, uint64(i))
		p := tlp.Packet{Kind: tlp.MWr, Addr64: true, FirstBE: 0xf, LastBE: 0xf, Address: base + uint64(i)*64, Data: data}
		buf, _ := p.AppendTo(nil)
		if err := rs[0].Send(buf); err != nil {
			w.Wait(rs[1].Counters().TLPsDelivered)
			continue
		}
		i++
	}
	waitfor.Progress(t, "delivering", func() (bool, uint64) {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == n, uint64(len(got))
	})
	mu.Lock()
	defer mu.Unlock()
	for i, v := range got {
		if v != uint64(i) {
			t.Fatalf("delivery %d is write %d", i, v)
		}
	}
	if polled.Load() == 0 {
		t.Fatal("Poll never took a frame")
	}
	t.Logf("Poll took %d frames", polled.Load())
}
