package driver

import (
	"hash/crc32"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/dxpu/dxpu/bridge/memlink"
)

// Faulty wraps a transport so that frames it sends suffer the given faults
// (loss, duplication, reordering, corruption, delay, bandwidth limit) on
// real time: how loss and delay are injected where the kernel has no netem.
// Loss, duplication and corruption are decided inline; a reordered frame is
// held back until the next frame has gone (or ReorderDelay passed); delay
// and bandwidth run through one FIFO delay line, so frames keep their order
// otherwise.
type Faulty struct {
	Transport
	f      memlink.Faults
	mu     sync.Mutex
	rng    *rand.Rand
	down   bool
	held   []byte
	timer  *time.Timer
	line   chan lineItem
	busy   time.Time
	stats  memlink.Stats
	closed bool
}

type lineItem struct {
	due time.Time
	b   []byte
}

// NewFaulty wraps t; seed drives the fault draws.
func NewFaulty(t Transport, f memlink.Faults, seed uint64) *Faulty {
	if f.ReorderDelay == 0 {
		f.ReorderDelay = f.Delay + 20*time.Microsecond
	}
	fl := &Faulty{Transport: t, f: f, rng: rand.New(rand.NewPCG(seed, seed+1))}
	if f.Delay > 0 || f.Bandwidth > 0 {
		fl.line = make(chan lineItem, 65536)
		go fl.run()
	}
	return fl
}

func (f *Faulty) run() {
	for it := range f.line {
		if d := time.Until(it.due); d > 0 {
			time.Sleep(d)
		}
		_ = f.Transport.Send(it.b)
	}
}

func (f *Faulty) chance(p float64) bool { return p > 0 && f.rng.Float64() < p }

// Send puts the frame on the faulty link.
func (f *Faulty) Send(frame []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats.Sent++
	f.stats.Bytes += uint64(len(frame))
	if f.down {
		f.stats.DownDrops++
		return nil
	}
	if f.chance(f.f.Loss) {
		f.stats.Lost++
		return nil
	}
	copies := 1
	if f.chance(f.f.Duplicate) {
		copies = 2
		f.stats.Duplicated++
	}
	for i := 0; i < copies; i++ {
		b := append([]byte(nil), frame...)
		if f.chance(f.f.Corrupt) {
			f.stats.Corrupted++
			sum := crc32.ChecksumIEEE(b)
			bit := f.rng.IntN(len(b) * 8)
			b[bit/8] ^= 1 << (bit % 8)
			if crc32.ChecksumIEEE(b) != sum && !f.f.PassCorrupt {
				continue // the receiving NIC's FCS check drops it
			}
		}
		if f.held == nil && f.chance(f.f.Reorder) {
			f.stats.Reordered++
			f.held = b
			f.timer = time.AfterFunc(f.f.ReorderDelay, f.flushHeld)
			continue
		}
		f.emit(b)
		if f.held != nil {
			f.timer.Stop()
			f.emit(f.held)
			f.held = nil
		}
	}
	return nil
}

func (f *Faulty) flushHeld() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held != nil {
		f.emit(f.held)
		f.held = nil
	}
}

// emit sends b now or through the delay line; mu held.
func (f *Faulty) emit(b []byte) {
	if f.closed {
		return
	}
	f.stats.Delivered++
	if f.line == nil {
		_ = f.Transport.Send(b)
		return
	}
	now := time.Now()
	due := now
	if f.f.Bandwidth > 0 {
		if f.busy.After(due) {
			due = f.busy
		}
		due = due.Add(time.Duration(float64(len(b)*8) / f.f.Bandwidth * 1e9))
		f.busy = due
	}
	select {
	case f.line <- lineItem{due: due.Add(f.f.Delay), b: b}:
	default:
		f.stats.QueueDrops++
		f.stats.Delivered--
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
