package driver_test

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// groPipe is a pollPipe that coalesces queued frames as UDP GRO does: a
// run of frames of one size (the last may be shorter) in one buffer.
type groPipe struct {
	*pollPipe
	pending []byte
	runs    atomic.Int64 // messages of more than one frame
}

func (p *groPipe) EnableGRO() bool { return true }

func (p *groPipe) next() ([]byte, bool) {
	if f := p.pending; f != nil {
		p.pending = nil
		return f, true
	}
	select {
	case f := <-p.in:
		return f, true
	default:
		return nil, false
	}
}

func (p *groPipe) TryRecvSegments(bufs [][]byte, sizes, segs []int) (int, error) {
	select {
	case <-p.done:
		return 0, errClosedPipe
	default:
	}
	k := 0
	for ; k < len(bufs); k++ {
		f, ok := p.next()
		if !ok {
			break
		}
		n := copy(bufs[k], f)
		seg, frames := n, 1
		for {
			g, ok := p.next()
			if !ok {
				break
			}
			if len(g) > seg || n+len(g) > len(bufs[k]) {
				p.pending = g
				break
			}
			n += copy(bufs[k][n:], g)
			frames++
			if len(g) < seg {
				break
			}
		}
		if frames > 1 {
			p.runs.Add(1)
		}
		sizes[k], segs[k] = n, seg
	}
	return k, nil
}

func (p *groPipe) WaitReadable() error {
	for len(p.in) == 0 && p.pending == nil {
		select {
		case <-p.ready:
		case <-p.done:
			return errClosedPipe
		}
	}
	return nil
}

// TestGRORunsCutExactly: runs of equal frames (single frames included)
// reach the bridge frame by frame, with no empty remainder fed as a
// frame of its own: a cut one byte off, or a remainder fed as a frame
// (dropped as malformed), fails it.
func TestGRORunsCutExactly(t *testing.T) {
	t.Parallel()
	a, b := newPollPipes()
	gp := &groPipe{pollPipe: b}
	h, g := newRunner(t, quietConfig(bridge.RoleHost), a), newRunner(t, quietConfig(bridge.RoleGPU), gp)
	var w writes
	g.OnTLP = w.onTLP
	startRun(t, h)
	startRun(t, g)
	waitUp(t, h, g)
	const n = 1000
	// A full bridge (ErrBusy) makes room as the GPU side takes writes:
	// wait for that, failing if it stops.
	room := waitfor.NewWatch(t, "the GPU side taking writes while the host's bridge is full")
	for i := 0; i < n; {
		burst := make([][]byte, 0, 100)
		for j := 0; j < 100 && i+j < n; j++ {
			burst = append(burst, write(t, i+j))
		}
		k, err := h.SendMany(burst)
		i += k
		if err != nil {
			if !errors.Is(err, bridge.ErrBusy) {
				t.Fatal(err)
			}
			room.Wait(uint64(w.len()))
		}
	}
	waitLen(t, &w, n)
	if err := g.FrameError(); err != nil || g.Counters().FramesDropped != 0 {
		t.Fatalf("GPU side dropped %d frames (last: %v)", g.Counters().FramesDropped, err)
	}
	if !slices.Equal(w.list(), seq(n)) {
		t.Fatal("writes not delivered once each, in order")
	}
	if gp.runs.Load() == 0 {
		t.Fatal("no run of several frames came coalesced")
	}
}
