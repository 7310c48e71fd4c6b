package driver

import (
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/dxpu/dxpu/bridge/memlink"
)

// Faulty wraps a transport so that frames it sends suffer the given faults
// (loss, duplication, reordering, corruption, delay, bandwidth limit) on
// real time: how loss and delay are injected where the kernel has no netem.
// Loss, duplication and corruption are decided inline; a reordered frame is
// held back until the next frame has gone (or ReorderDelay passed, by
// default Delay + memlink.ReorderSlack, as on the virtual-time link); delay
// and bandwidth run through one FIFO delay line, so frames keep their order
// otherwise.
//
// Faulty passes batches through (SendBatch, RecvBatch) and reuses its frame
// copies, so that fault injection does not become the bottleneck it
// measures: the delay line sends every frame that is due in one batch.
type Faulty struct {
	Transport
	dice   memlink.Dice // mu held
	mu     sync.Mutex
	down   bool
	held   []byte
	timer  *time.Timer
	line   chan lineItem
	busy   time.Time
	stats  memlink.Stats
	closed bool
	bs     BatchSender // Transport as one, or nil
	out    [][]byte    // frames emitted inline by the current call; mu held
	free   chan []byte // frame copies to reuse
}

type lineItem struct {
	due time.Time
	b   []byte
}

// NewFaulty wraps t; seed drives the fault draws.
func NewFaulty(t Transport, f memlink.Faults, seed uint64) *Faulty {
	f = f.WithDefaults() // ReorderDelay Delay + 5 us, as memlink.Link's
	fl := &Faulty{Transport: t, out: make([][]byte, 0, 2*maxTxBatch), free: make(chan []byte, 1024)}
	fl.dice = memlink.Dice{F: f, Rng: rand.New(rand.NewPCG(seed, seed+1)), Stats: &fl.stats}
	fl.bs, _ = t.(BatchSender)
	if f.Delay > 0 || f.Bandwidth > 0 {
		fl.line = make(chan lineItem, 65536)
		go fl.run()
	}
	return fl
}

// copyFrame returns a copy of frame in a reused buffer.
func (f *Faulty) copyFrame(frame []byte) []byte {
	select {
	case b := <-f.free:
		if cap(b) >= len(frame) {
			return append(b[:0], frame...)
		}
	default:
	}
	return append(make([]byte, 0, max(len(frame), 9216)), frame...)
}

func (f *Faulty) recycle(b []byte) {
	select {
	case f.free <- b:
	default:
	}
}

// sendAll hands frames to the wrapped transport, in one call where it takes
// batches, and recycles them.
func (f *Faulty) sendAll(frames [][]byte) {
	if f.bs != nil {
		for rest := frames; len(rest) > 0; {
			n, err := f.bs.SendBatch(rest)
			if err == nil || n >= len(rest) {
				break
			}
			rest = rest[n+1:]
		}
	} else {
		for _, b := range frames {
			_ = f.Transport.Send(b)
		}
	}
	for i, b := range frames {
		f.recycle(b)
		frames[i] = nil
	}
}

func (f *Faulty) run() {
	batch := make([][]byte, 0, maxTxBatch)
	var next lineItem
	have := false
	for {
		if !have {
			it, ok := <-f.line
			if !ok {
				return
			}
			next = it
		}
		have = false
		if d := time.Until(next.due); d > 0 {
			time.Sleep(d)
		}
		batch = append(batch[:0], next.b)
		now := time.Now()
		open := true
	more:
		for len(batch) < cap(batch) {
			select {
			case it, ok := <-f.line:
				if !ok {
					open = false
					break more
				}
				if it.due.After(now) {
					next, have = it, true
					break more
				}
				batch = append(batch, it.b)
			default:
				break more
			}
		}
		f.sendAll(batch)
		if !open {
			return
		}
	}
}

// Send puts the frame on the faulty link.
func (f *Faulty) Send(frame []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.put(frame)
	f.flushOut()
	return nil
}

// SendBatch puts the frames on the faulty link, in order; they reach the
// wrapped transport in one batch where it takes batches.
func (f *Faulty) SendBatch(frames [][]byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fr := range frames {
		f.put(fr)
	}
	f.flushOut()
	return len(frames), nil
}

// RecvBatch receives through the wrapped transport, several frames at once
// where it takes batches.
func (f *Faulty) RecvBatch(bufs [][]byte, sizes []int) (int, error) {
	if br, ok := f.Transport.(BatchReceiver); ok {
		return br.RecvBatch(bufs, sizes)
	}
	if len(bufs) == 0 || len(sizes) == 0 {
		return 0, errors.New("driver: faulty: receive: no buffers")
	}
	n, err := f.Transport.Recv(bufs[0])
	if err != nil {
		return 0, err
	}
	sizes[0] = n
	return 1, nil
}

// put applies the faults to one frame; mu held.
func (f *Faulty) put(frame []byte) {
	if !f.dice.Offer(len(frame), f.down) {
		return
	}
	for copies := f.dice.Copies(); copies > 0; copies-- {
		b := f.copyFrame(frame)
		if f.dice.Corrupt(b) && !f.dice.F.PassCorrupt {
			f.recycle(b)
			continue // the receiving NIC's FCS check drops it
		}
		if f.held == nil && f.dice.Reorder() {
			f.held = b
			f.timer = time.AfterFunc(f.dice.F.ReorderDelay, f.flushHeld)
			continue
		}
		f.emit(b)
		if f.held != nil {
			f.timer.Stop()
			f.emit(f.held)
			f.held = nil
		}
	}
}

func (f *Faulty) flushHeld() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held != nil {
		f.emit(f.held)
		f.held = nil
		f.flushOut()
	}
}

// flushOut sends the frames emitted inline; mu held.
func (f *Faulty) flushOut() {
	if len(f.out) > 0 {
		f.sendAll(f.out)
		f.out = f.out[:0]
	}
}

// emit sends b (a copy Faulty owns) now or through the delay line; mu held.
func (f *Faulty) emit(b []byte) {
	if f.closed {
		f.recycle(b)
		return
	}
	f.stats.Delivered++
	if f.line == nil {
		f.out = append(f.out, b)
		return
	}
	now := time.Now()
	due := now
	if f.dice.F.Bandwidth > 0 {
		if f.busy.After(due) {
			due = f.busy
		}
		due = due.Add(time.Duration(float64(len(b)*8) / f.dice.F.Bandwidth * 1e9))
		f.busy = due
	}
	select {
	case f.line <- lineItem{due: due.Add(f.dice.F.Delay), b: b}:
	default:
		f.stats.QueueDrops++
		f.stats.Delivered--
		f.recycle(b)
	}
}

// SetDown takes the link down or up.
func (f *Faulty) SetDown(down bool) {
	f.mu.Lock()
	f.down = down
	f.mu.Unlock()
}

// Stats returns what the link did.
func (f *Faulty) Stats() memlink.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// Close closes the transport and stops the delay line.
func (f *Faulty) Close() error {
	f.mu.Lock()
	if !f.closed && f.line != nil {
		close(f.line)
	}
	f.closed = true
	f.mu.Unlock()
	return f.Transport.Close()
}
