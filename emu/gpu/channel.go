package gpu

import (
	"encoding/binary"
	"time"
)

// channel is one GPFIFO channel: the command processor fetches the ring
// entries the host announced with a doorbell, then the pushbuffer segments
// they point at, and executes their commands in order. Fetching runs ahead
// of execution, as on real GPUs, so a busy channel hides fetch latency.
type channel struct {
	g       *GPU
	idx     int
	base    uint64
	entries uint32
	get     uint32 // next entry to fetch
	put     uint32
	errors  uint32
	// aperture is where the ring lives (ApertureHost or ApertureVRAM).
	aperture uint32

	fetching bool
	segs     fifo[*segment] // fetched or in flight, in ring order
	free     []*segment
	queue    fifo[Command] // decoded, waiting to execute
	busy     bool
	// The ring read in flight: its first entry and how many.
	ring             fetch
	ringFirst, ringN uint32
	// The command running (one at a time: busy) when it ends by an event.
	op           Command
	opStart      time.Duration
	opEnd        time.Duration
	finishF      func()
	opDoneF      func()
	ringFetchedF func(ok bool)
}

// segment is one pushbuffer segment: read, then decoded. Segments are
// recycled once their commands are queued.
type segment struct {
	ch       *channel
	done     bool
	cmds     []Command
	f        fetch
	fetchedF func(ok bool)
}

// newChannel returns channel idx of g with its method values made.
func newChannel(g *GPU, idx int) *channel {
	ch := &channel{g: g, idx: idx}
	ch.finishF, ch.opDoneF, ch.ringFetchedF = ch.finish, ch.opDone, ch.ringFetched
	return ch
}

func (ch *channel) newSegment() *segment {
	if n := len(ch.free); n > 0 {
		seg := ch.free[n-1]
		ch.free = ch.free[:n-1]
		return seg
	}
	seg := &segment{ch: ch}
	seg.fetchedF = seg.fetched
	return seg
}

func (ch *channel) doorbell(put uint32) {
	if ch.entries == 0 {
		ch.errors++
		return
	}
	ch.put = put % ch.entries
	ch.fetch()
}

// fetch reads the ring entries between get and put (one read, two when
// the ring wraps), then the segments they point at.
func (ch *channel) fetch() {
	if ch.fetching || ch.get == ch.put {
		return
	}
	ch.fetching = true
	end := ch.put
	if end < ch.get {
		end = ch.entries
	}
	ch.ringFirst, ch.ringN = ch.get, end-ch.get
	ch.ring.start(ch.g, ch.base+uint64(ch.ringFirst)*GPEntrySize, int(ch.ringN)*GPEntrySize, ch.aperture == ApertureVRAM, ch.ringFetchedF)
}

// ringFetched starts the reads of the segments the fetched entries point
// at.
func (ch *channel) ringFetched(ok bool) {
	ch.fetching = false
	if !ok {
		ch.errors++
		ch.g.Stats.Errors++
		return
	}
	first, count, b := ch.ringFirst, ch.ringN, ch.ring.buf
	ch.get = (first + count) % ch.entries
	refused := false
	for i := 0; i < int(count); i++ {
		e := b[i*GPEntrySize:]
		addr := binary.LittleEndian.Uint64(e)
		n := binary.LittleEndian.Uint32(e[8:])
		flags := binary.LittleEndian.Uint32(e[12:])
		seg := ch.newSegment()
		ch.segs.push(seg)
		if n > MaxSegmentBytes {
			seg.done, refused = true, true
			ch.errors++
			ch.g.Stats.Errors++
			continue
		}
		seg.f.start(ch.g, addr, int(n), flags&GPEntryVRAM != 0, seg.fetchedF)
	}
	if refused {
		// A refused segment completes no read: drain it here.
		ch.drainSegs()
	}
	ch.fetch()
}

// fetched decodes the segment once its bytes are in.
func (seg *segment) fetched(ok bool) {
	ch := seg.ch
	seg.done = true
	if !ok {
		ch.errors++
		ch.g.Stats.Errors++
	} else {
		cmds, err := DecodeCommands(seg.f.buf, seg.cmds[:0])
		if err != nil {
			ch.errors++
			ch.g.Stats.Errors++
		}
		seg.cmds = cmds
	}
	ch.drainSegs()
}

// fetch is one read of commands into buf: across PCIe by DMA reads of
// host memory, or from the GPU's own memory, which the command processor
// reads in Config.LocalFetchLatency without a TLP. Its buffer and method
// values are reused from read to read.
type fetch struct {
	g       *GPU
	buf     []byte
	st      readStream
	ok      bool
	done    func(ok bool)
	onDataF func(off uint64, b []byte)
	localF  func()
}

// start reads n bytes at addr (a VRAM offset with vram) and calls done
// with whether the read succeeded; buf then holds the bytes.
func (f *fetch) start(g *GPU, addr uint64, n int, vram bool, done func(ok bool)) {
	if f.onDataF == nil {
		f.onDataF, f.localF = f.onData, f.local
	}
	f.g, f.done = g, done
	if cap(f.buf) < n {
		f.buf = make([]byte, n)
	}
	f.buf = f.buf[:n]
	if !vram {
		f.st = readStream{addr: addr, end: addr + uint64(n), priority: true, onData: f.onDataF, onDone: done}
		g.dma.start(&f.st)
		return
	}
	mem := g.cfg.Model.MemBytes
	if addr > mem || uint64(n) > mem-addr {
		f.ok = false
		g.s.After(g.cfg.LocalFetchLatency, f.localF)
		return
	}
	g.VRAM.Read(addr, f.buf)
	g.Stats.LocalFetches++
	f.ok = true
	g.s.After(g.cfg.LocalFetchLatency, f.localF)
}

func (f *fetch) onData(off uint64, b []byte) { copy(f.buf[off:], b) }

func (f *fetch) local() { f.done(f.ok) }

func (ch *channel) drainSegs() {
	for ch.segs.len() > 0 && (*ch.segs.front()).done {
		seg := ch.segs.pop()
		for _, c := range seg.cmds {
			ch.queue.push(c)
		}
		seg.done, seg.cmds = false, seg.cmds[:0]
		ch.free = append(ch.free, seg)
	}
	ch.run()
}

// run executes queued commands until one has to wait.
func (ch *channel) run() {
	g := ch.g
	for !ch.busy && ch.queue.len() > 0 {
		c := ch.queue.pop()
		if (c.Op == OpCopy || c.Op == OpMemset) && c.Len > g.cfg.Model.MemBytes {
			// Larger than the GPU's memory: a corrupt pushbuffer, refused
			// rather than run for hours.
			ch.errors++
			g.Stats.Errors++
			continue
		}
		switch c.Op {
		case OpNop:
		case OpWait:
			ch.busy = true
			g.s.After(time.Duration(c.Duration), ch.finishF)
		case OpKernel:
			ch.busy = true
			g.Stats.Kernels++
			ch.op = c
			ch.opStart = g.s.Now() + g.cfg.KernelOverhead
			ch.opEnd = ch.opStart + time.Duration(c.Duration)
			g.s.At(ch.opEnd, ch.opDoneF)
		case OpCopy:
			ch.busy = true
			switch c.Dir {
			case DirH2D:
				g.h2d.push(c, ch.finishF, &ch.errors)
			case DirD2H:
				g.d2h.push(c, ch.finishF, &ch.errors)
			default:
				d := time.Duration(c.Duration)
				if d == 0 {
					d = time.Duration(float64(2*c.Len) / g.cfg.VRAMBytesPerSec * 1e9)
				}
				g.VRAM.Copy(g.VRAM, c.Dst, c.Src, c.Len)
				ch.timed(c, d)
			}
		case OpMemset:
			ch.busy = true
			d := time.Duration(c.Duration)
			if d == 0 {
				d = time.Duration(float64(c.Len) / g.cfg.VRAMBytesPerSec * 1e9)
			}
			g.VRAM.Fill(c.Dst, byte(c.Value), c.Len)
			ch.timed(c, d)
		case OpSemRelease:
			var b [16]byte
			binary.LittleEndian.PutUint64(b[:], c.Value)
			n := 8
			if c.Flags&SemTime != 0 {
				binary.LittleEndian.PutUint64(b[8:], uint64(g.s.Now()))
				n = 16
			}
			if c.Flags&SemHost != 0 {
				g.writeHost(c.Addr, b[:n])
			} else {
				g.VRAM.Write(c.Addr, b[:n])
				g.wakeAcquires()
			}
			if c.Flags&SemMSI != 0 {
				g.raiseMSI()
			}
		case OpSemAcquire:
			if c.Flags&SemHost == 0 && g.VRAM.Uint64(c.Addr) >= c.Value {
				continue
			}
			// Wait (host-memory semaphores are not polled: the driver only
			// acquires VRAM semaphores, released by other channels).
			ch.busy = true
			g.waiters = append(g.waiters, waiter{ch: ch, addr: c.Addr, value: c.Value})
		}
	}
}

func (ch *channel) finish() {
	ch.busy = false
	ch.run()
}

type waiter struct {
	ch    *channel
	addr  uint64
	value uint64
}

func (g *GPU) wakeAcquires() {
	keep := g.waiters[:0]
	ready := g.ready[:0]
	g.ready = nil // a channel woken here may wake others: its own scratch
	for _, w := range g.waiters {
		if g.VRAM.Uint64(w.addr) >= w.value {
			ready = append(ready, w.ch)
		} else {
			keep = append(keep, w)
		}
	}
	clear(g.waiters[len(keep):])
	g.waiters = keep
	for _, ch := range ready {
		ch.finish()
	}
	clear(ready)
	g.ready = ready[:0]
}

// Idle reports whether no channel has work fetched, queued or running.
func (g *GPU) Idle() bool {
	for _, ch := range g.chans {
		if ch.busy || ch.queue.len() > 0 || ch.segs.len() > 0 || ch.fetching || ch.get != ch.put {
			return false
		}
	}
	return true
}

// timed finishes a GPU-local operation of the channel after d.
func (ch *channel) timed(c Command, d time.Duration) {
	ch.op, ch.opStart, ch.opEnd = c, ch.g.s.Now(), -1
	ch.g.s.After(d, ch.opDoneF)
}

// opDone ends the command that runs by an event: a kernel at its end, a
// timed operation at the time it fires (opEnd < 0).
func (ch *channel) opDone() {
	end := ch.opEnd
	if end < 0 {
		end = ch.g.s.Now()
	}
	ch.g.trace(ch.op, ch.opStart, end)
	ch.finish()
}

func (g *GPU) trace(c Command, start, end time.Duration) {
	if g.OnOp != nil {
		g.OnOp(c, start, end)
	}
}
