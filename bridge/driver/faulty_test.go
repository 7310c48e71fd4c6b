package driver_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/memlink"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// TestFaultyReorderWaitsDelayToo: by default a frame held back for
// reordering waits the delay before it enters the delay line, so a lone
// one arrives after twice the delay; a hold that ignored the delay (only
// the few microseconds of slack) fails it.
func TestFaultyReorderWaitsDelayToo(t *testing.T) {
	t.Parallel()
	rec := &recorder{failAt: -1}
	const delay = 30 * time.Millisecond
	f := driver.NewFaulty(rec, memlink.Faults{Reorder: 1, Delay: delay}, 1)
	defer f.Close()
	start := time.Now()
	f.Send([]byte("only"))
	waitfor.Until(t, "the frame through", func() bool { got, _ := rec.snapshot(); return len(got) == 1 })
	if took := time.Since(start); took < 2*delay-5*time.Millisecond {
		t.Fatalf("a lone reordered frame arrived after %v, want the hold (the delay and its slack) and the delay, %v", took, 2*delay)
	}
}

// TestFaultyBatchErrorSendsRest: a frame the wrapped batch sender refuses
// is skipped, the ones after it still go; a Faulty that dropped the rest
// of the batch, or sent the refused frame again, fails it.
func TestFaultyBatchErrorSendsRest(t *testing.T) {
	t.Parallel()
	rec := &recorder{failAt: 1}
	f := driver.NewFaulty(rec, memlink.Faults{}, 1)
	defer f.Close()
	var frames [][]byte
	for i := range 6 {
		frames = append(frames, []byte(fmt.Sprintf("frame %d", i)))
	}
	f.SendBatch(frames)
	got, _ := rec.snapshot()
	want := []string{"frame 0", "frame 2", "frame 4"}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q (each call's second frame refused)", got, want)
	}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}

// TestFaultyReorderLosesNothing: with every frame picked for reordering,
// frames go out pairwise swapped, none lost: a Faulty that dropped the
// held frame when the next came, or let it pass first, fails it. Each
// hold ends with the next frame, so the six come through without waiting
// for ReorderDelay; the test waits for all six, then reads their order.
func TestFaultyReorderLosesNothing(t *testing.T) {
	t.Parallel()
	rec := &recorder{failAt: -1}
	f := driver.NewFaulty(rec, memlink.Faults{Reorder: 1, ReorderDelay: 5 * time.Millisecond}, 1)
	defer f.Close()
	for i := range 6 {
		f.Send([]byte{byte(i)})
	}
	var got [][]byte
	waitfor.Progress(t, "six frames through", func() (bool, uint64) {
		got, _ = rec.snapshot()
		return len(got) >= 6, uint64(len(got))
	})
	var order []byte
	for _, g := range got {
		order = append(order, g[0])
	}
	if !bytes.Equal(order, []byte{1, 0, 3, 2, 5, 4}) {
		t.Fatalf("frames out %v, want [1 0 3 2 5 4]", order)
	}
}

// TestFaultyBandwidthSerializes: at 8 Mbit/s ten 1000-byte frames take
// 10ms to leave, one after the other.
func TestFaultyBandwidthSerializes(t *testing.T) {
	t.Parallel()
	rec := &recorder{failAt: -1}
	f := driver.NewFaulty(rec, memlink.Faults{Bandwidth: 8e6}, 1)
	defer f.Close()
	frames := make([][]byte, 10)
	for i := range frames {
		frames[i] = make([]byte, 1000)
	}
	start := time.Now()
	f.SendBatch(frames)
	waitfor.Until(t, "all frames through", func() bool { got, _ := rec.snapshot(); return len(got) == 10 })
	if took := time.Since(start); took < 9*time.Millisecond {
		t.Fatalf("10 kB at 8 Mbit/s through in %v, want at least 10ms", took)
	}
}

// TestFaultyClosedSendsNothing: after Close, frames go nowhere.
func TestFaultyClosedSendsNothing(t *testing.T) {
	t.Parallel()
	rec := &recorder{failAt: -1}
	f := driver.NewFaulty(rec, memlink.Faults{}, 1)
	f.Close()
	f.Send([]byte("late"))
	f.SendBatch([][]byte{[]byte("later")})
	if got, _ := rec.snapshot(); len(got) != 0 {
		t.Fatalf("%d frames sent after Close", len(got))
	}
}

// TestFaultyDelayLineKeepsLaterFramesBack: a frame that comes due later
// than the one the delay line just sent waits until it is due: a delay
// line that sent with the frame it woke for every frame already queued,
// due or not, fails it.
//
// The two frames are sent back to back through a bandwidth limit, so the
// second comes due one serialization time (50ms) after the first, and it
// is queued long before the first is due: no pause between the sends,
// whose length the machine's load would decide, sets the scene. A frame
// never leaves before it is due, so the second's arrival is at least its
// due time after the send on any machine; one sent early, with the
// first, arrives up to 50ms sooner, unless the delay line's goroutine
// woke more than 50ms late for the first.
func TestFaultyDelayLineKeepsLaterFramesBack(t *testing.T) {
	t.Parallel()
	rec := &recorder{failAt: -1}
	const (
		delay     = 20 * time.Millisecond
		size      = 1250
		bandwidth = 200e3 // bit/s: 50ms for a frame of size
		serialize = time.Duration(size * 8 / bandwidth * float64(time.Second))
	)
	f := driver.NewFaulty(rec, memlink.Faults{Delay: delay, Bandwidth: bandwidth}, 1)
	defer f.Close()
	sent := time.Now()
	f.Send(bytes.Repeat([]byte{1}, size))
	f.Send(bytes.Repeat([]byte{2}, size))
	waitfor.Until(t, "both through", func() bool { got, _ := rec.snapshot(); return len(got) == 2 })
	if took, due := time.Since(sent), 2*serialize+delay; took < due {
		t.Fatalf("the second frame arrived %v after the send, before its due time %v (the first was due at %v)", took, due, serialize+delay)
	}
}

// TestFaultyDownDropsFrames: a link set down drops what is sent, and
// carries frames again once up.
func TestFaultyDownDropsFrames(t *testing.T) {
	t.Parallel()
	rec := &recorder{failAt: -1}
	f := driver.NewFaulty(rec, memlink.Faults{}, 1)
	defer f.Close()
	f.SetDown(true)
	f.Send([]byte("down"))
	if got, _ := rec.snapshot(); len(got) != 0 || f.Stats().DownDrops != 1 {
		t.Fatalf("down: %d frames through, stats %+v", len(got), f.Stats())
	}
	f.SetDown(false)
	f.Send([]byte("up"))
	if got, _ := rec.snapshot(); len(got) != 1 || string(got[0]) != "up" {
		t.Fatalf("up again: got %q", got)
	}
}
