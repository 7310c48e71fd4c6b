package driver_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// flaky is a pipe whose next send (or the first frame of the next
// batch) fails when failNext is set; it counts frames through.
type flaky struct {
	*pipe
	failNext atomic.Bool
	through  atomic.Int64
}

func (f *flaky) Send(b []byte) error {
	if f.failNext.CompareAndSwap(true, false) {
		return errors.New("flaky: refused")
	}
	f.through.Add(1)
	return f.pipe.Send(b)
}

type flakyBatch struct{ *flaky }

func (f flakyBatch) SendBatch(fs [][]byte) (int, error) {
	for i, b := range fs {
		if err := f.Send(b); err != nil {
			return i, err
		}
	}
	return len(fs), nil
}

// TestSendErrorSendsTheRest: a frame the transport refuses is counted, and
// the frames after it in the same flush still go, over Send and
// SendBatch alike. A runner that gave up on the rest of the flush at the
// first refusal, or counted nothing, fails it.
func TestSendErrorSendsTheRest(t *testing.T) {
	t.Parallel()
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprint("batch=", batch), func(t *testing.T) {
			t.Parallel()
			a, b := newPipes()
			fa := &flaky{pipe: a}
			var ht driver.Transport = fa
			if batch {
				ht = flakyBatch{fa}
			}
			h, g := newRunner(t, turnConfig(bridge.RoleHost), ht), newRunner(t, turnConfig(bridge.RoleGPU), b)
			startRun(t, h)
			startRun(t, g)
			waitUp(t, h, g)
			tlps := make([][]byte, 60) // two frames
			for i := range tlps {
				tlps[i] = write(t, i)
			}
			f0, t0 := h.Counters().FramesSent, fa.through.Load()
			fa.failNext.Store(true)
			if n, err := h.SendMany(tlps); n != len(tlps) || err != nil {
				t.Fatalf("SendMany: %d, %v", n, err)
			}
			framed, through := h.Counters().FramesSent-f0, fa.through.Load()-t0
			if framed < 2 || through != int64(framed)-1 || h.SendErrors() != 1 {
				t.Fatalf("%d frames built, %d went through, %d send errors; want all but the refused one through, 1 error", framed, through, h.SendErrors())
			}
		})
	}
}

// TestDroppedFrameReported: a frame the bridge drops is FrameError's and
// OnFrameDropped hears it; a runner that kept neither fails it.
func TestDroppedFrameReported(t *testing.T) {
	t.Parallel()
	p := newHeldPair(t, false)
	if err := p.gpu.FrameError(); err != nil {
		t.Fatalf("FrameError before any bad frame: %v", err)
	}
	var heard []error
	p.gpu.OnFrameDropped = func(_ time.Duration, err error) { heard = append(heard, err) } // Poll's goroutine: this one
	p.gpuPipe.in <- []byte{0xde, 0xad, 0xbe, 0xef}
	waitfor.Until(t, "a poll takes the junk", func() bool { return p.gpu.Poll() > 0 })
	err := p.gpu.FrameError()
	if err == nil || len(heard) != 1 || heard[0] != err {
		t.Fatalf("FrameError %v, OnFrameDropped heard %v: want the one drop", err, heard)
	}
}
