package gpu

import (
	"encoding/binary"
	"time"

	"github.com/dxpu/dxpu/tlp"
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
	// notify is the host address of the error notifier (0: none).
	notify uint64
	// A fault stops the channel in ring order: failing is set once a
	// fetch failed (nothing more is fetched), halted once the fault is
	// next in ring order (its marker is queued: nothing more is drained),
	// stopped once the commands before it ran and the channel stopped,
	// fault saying why. pending is the fault whose marker is queued.
	failing, halted, stopped bool
	fault, pending           ChannelFault

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
	ch   *channel
	done bool
	// fault is set (Reason not FaultNone) when the segment failed: cmds
	// are then the commands before the fault.
	fault    ChannelFault
	addr     uint64
	vram     bool
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
	if ch.entries == 0 || ch.entries > MaxGPEntries {
		ch.errors++
		return
	}
	ch.put = put % ch.entries
	ch.fetch()
}

// fetch reads the ring entries between get and put (one read, two when
// the ring wraps), then the segments they point at.
func (ch *channel) fetch() {
	if ch.fetching || ch.failing || ch.get == ch.put {
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
		if !ch.failing {
			// The channel stops at the first entry it could not read,
			// once the segments fetched before it ran.
			st, at := ch.ring.failure()
			seg := ch.newSegment()
			seg.done = true
			seg.fault = ChannelFault{Reason: FaultRingFetch, Status: st, VRAM: ch.aperture == ApertureVRAM, Addr: at}
			ch.segs.push(seg)
			ch.failing = true
			ch.drainSegs()
		}
		return
	}
	if ch.failing {
		return // entries behind a fault: never run
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
		seg.addr, seg.vram = addr, flags&GPEntryVRAM != 0
		ch.segs.push(seg)
		if n > MaxSegmentBytes {
			seg.done, refused = true, true
			seg.fault = ChannelFault{Reason: FaultSegmentSize, VRAM: seg.vram, Addr: addr}
			ch.errors++
			ch.g.Stats.Errors++
			ch.failing = true
			break // the channel stops here: what follows never runs
		}
		seg.f.start(ch.g, addr, int(n), seg.vram, seg.fetchedF)
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
		st, at := seg.f.failure()
		seg.fault = ChannelFault{Reason: FaultSegmentFetch, Status: st, VRAM: seg.vram, Addr: at}
		ch.failing = true
	} else {
		cmds, err := DecodeCommands(seg.f.buf, seg.cmds[:0])
		if err != nil {
			ch.errors++
			ch.g.Stats.Errors++
			// The commands before the bad one run; the channel stops
			// at it.
			seg.fault = ChannelFault{Reason: FaultDecode, VRAM: seg.vram, Addr: seg.addr + encodedBytes(cmds)}
			ch.failing = true
		}
		seg.cmds = cmds
	}
	ch.drainSegs()
}

// encodedBytes is how many pushbuffer bytes cmds take.
func encodedBytes(cmds []Command) uint64 {
	n := uint64(0)
	for _, c := range cmds {
		n += 4 + 4*uint64(argWords[c.Op])
	}
	return n
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
		// Nothing answers there: as an unsupported request.
		f.ok = false
		f.st = readStream{failed: true, status: tlp.StatusUR, failAt: addr}
		g.s.After(g.cfg.LocalFetchLatency, f.localF)
		return
	}
	g.VRAM.Read(addr, f.buf)
	g.Stats.LocalFetches++
	f.ok = true
	g.s.After(g.cfg.LocalFetchLatency, f.localF)
}

func (f *fetch) onData(off uint64, b []byte) { copy(f.buf[off:], b) }

// failure returns the completion status and the address of the first
// failed read of a fetch that did not succeed.
func (f *fetch) failure() (tlp.Status, uint64) { return f.st.status, f.st.failAt }

func (f *fetch) local() { f.done(f.ok) }

func (ch *channel) drainSegs() {
	for !ch.halted && ch.segs.len() > 0 && (*ch.segs.front()).done {
		seg := ch.segs.pop()
		for _, c := range seg.cmds {
			ch.queue.push(c)
		}
		if seg.fault.Reason != FaultNone {
			// What came before runs; then the channel stops. Segments
			// still being read behind it are left: they never run.
			ch.halted, ch.pending = true, seg.fault
			ch.queue.push(Command{Op: opFault})
		}
		seg.done, seg.cmds, seg.fault = false, seg.cmds[:0], ChannelFault{}
		ch.free = append(ch.free, seg)
	}
	ch.run()
}

// opFault is the channel's own marker of a fault in its command queue
// (no pushbuffer encodes it: DecodeCommands refuses the opcode).
const opFault Opcode = 0xff

// stop stops the channel on fault f: the commands queued behind it are
// dropped, nothing more is fetched, and the host is told: the notifier
// record is posted (if the driver gave an address), then the MSI. Posted
// writes keep their order, so the host sees every semaphore released
// before the fault first.
func (ch *channel) stop(f ChannelFault) {
	if ch.stopped {
		return
	}
	ch.stopped, ch.halted, ch.failing = true, true, true
	ch.fault = f
	for ch.queue.len() > 0 {
		ch.queue.pop()
	}
	g := ch.g
	if ch.notify != 0 {
		var b [NotifierBytes]byte
		g.writeHost(ch.notify, AppendNotifier(b[:0], f))
	}
	g.raiseMSI()
}

// run executes queued commands until one has to wait.
func (ch *channel) run() {
	g := ch.g
	for !ch.busy && !ch.stopped && ch.queue.len() > 0 {
		c := ch.queue.pop()
		if (c.Op == OpCopy || c.Op == OpMemset) && c.Len > g.cfg.Model.MemBytes {
			// Larger than the GPU's memory: a corrupt pushbuffer, refused
			// rather than run for hours.
			ch.errors++
			g.Stats.Errors++
			ch.stop(ChannelFault{Reason: FaultCommandRange, VRAM: c.Op == OpMemset || c.Dir != DirD2H, Addr: c.Dst})
			return
		}
		switch c.Op {
		case opFault:
			ch.stop(ch.pending)
			return
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
				g.h2d.push(c, ch.finishF, ch)
			case DirD2H:
				g.d2h.push(c, ch.finishF, ch)
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

// Idle reports whether no channel has work fetched, queued or running (a
// stopped channel runs nothing more).
func (g *GPU) Idle() bool {
	for _, ch := range g.chans {
		if ch.stopped {
			continue
		}
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
