package gpu

import (
	"time"

	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/tlp"
)

// readStream is one DMA read of host memory: a command fetch or the
// TLP-level part of a host-to-device copy. The engine cuts it into requests
// of at most MRRS bytes that never cross 4 KiB.
type readStream struct {
	addr, end uint64 // next request address, end of the stream
	base      uint64 // first address (offsets passed to onData are from here)
	inflight  int
	onData    func(off uint64, data []byte)
	onDone    func(ok bool)
	failed    bool
	priority  bool
	// The first failed read: its completion status and the address of
	// the first byte it did not bring.
	status tlp.Status
	failAt uint64
}

type pending struct {
	st   *readStream
	addr uint64 // address of the next byte expected
	left int    // bytes still expected
}

// dmaEngine issues DMA reads within the tag budget: 256 tags (0..255) with
// 8-bit tags, 768 (256..1023) once 10-bit tags are enabled, and never more
// than Config.MaxOutstanding.
type dmaEngine struct {
	g        *GPU
	tags     [1024]pending
	inUse    [1024]bool
	free     []uint16
	tenBit   bool
	inflight int
	hi, lo   fifo[*readStream] // waiting streams: command fetches first
	buf      []byte
}

func (d *dmaEngine) limit() int {
	n := 256
	if tenBitTags(d.g.Cfg) {
		n = 768
	}
	return min(n, d.g.cfg.MaxOutstanding)
}

func (d *dmaEngine) resetTags() {
	d.tenBit = tenBitTags(d.g.Cfg)
	d.free = d.free[:0]
	lo, hi := 0, 256
	if d.tenBit {
		lo, hi = 256, 1024
	}
	for t := hi - 1; t >= lo; t-- {
		if !d.inUse[t] {
			d.free = append(d.free, uint16(t))
		}
	}
}

func (d *dmaEngine) start(st *readStream) {
	st.base = st.addr
	if st.addr >= st.end {
		st.onDone(true)
		return
	}
	if st.priority {
		d.hi.push(st)
	} else {
		d.lo.push(st)
	}
	d.pump()
}

func (d *dmaEngine) pump() {
	if d.tenBit != tenBitTags(d.g.Cfg) || (d.free == nil && d.inflight == 0) {
		d.resetTags()
	}
	if d.g.cmd()&pcie.CmdBusMaster == 0 || d.g.up == nil {
		return
	}
	mrrs := mrrsOf(d.g.Cfg)
	for d.inflight < d.limit() && len(d.free) > 0 {
		var st *readStream
		switch {
		case d.hi.len() > 0:
			st = *d.hi.front()
		case d.lo.len() > 0:
			st = *d.lo.front()
		default:
			return
		}
		n := uint64(mrrs)
		if b := 4096 - st.addr%4096; b < n {
			n = b
		}
		if r := st.end - st.addr; r < n {
			n = r
		}
		tag := d.free[len(d.free)-1]
		d.free = d.free[:len(d.free)-1]
		d.inUse[tag] = true
		d.tags[tag] = pending{st: st, addr: st.addr, left: int(n)}
		d.inflight++
		if d.inflight > d.g.Stats.MaxInFlight {
			d.g.Stats.MaxInFlight = d.inflight
		}
		st.inflight++
		d.buf = pcie.AppendMRd(d.buf[:0], d.g.id, tag, st.addr, int(n))
		d.g.Stats.ReadRequests++
		st.addr += n
		if st.addr >= st.end {
			if st.priority {
				d.hi.pop()
			} else {
				d.lo.pop()
			}
		}
		d.g.send(d.buf)
	}
}

func (d *dmaEngine) completion(v tlp.View) {
	tag := v.Tag()
	if int(tag) >= len(d.tags) || !d.inUse[tag] || v.RequesterID() != d.g.id {
		d.g.Stats.BadCompletion++
		return
	}
	p := &d.tags[tag]
	st := p.st
	if v.Status() != tlp.StatusSC || !v.HasData() {
		if !st.failed {
			st.status, st.failAt = v.Status(), p.addr
		}
		st.failed = true
		d.g.Stats.Errors++
		d.retire(tag, p)
		return
	}
	lead := int(v.LowerAddress() & 3)
	pl := v.Payload()
	n := min(v.ByteCount(), len(pl)-lead, p.left)
	if n <= 0 || uint64(v.LowerAddress()) != p.addr&0x7f {
		d.g.Stats.BadCompletion++
		return
	}
	st.onData(p.addr-st.base, pl[lead:lead+n])
	d.g.Stats.ReadBytes += uint64(n)
	p.addr += uint64(n)
	p.left -= n
	if p.left == 0 {
		d.retire(tag, p)
	}
}

func (d *dmaEngine) retire(tag uint16, p *pending) {
	st := p.st
	d.inUse[tag] = false
	*p = pending{}
	d.inflight--
	if (tag >= 256) == d.tenBit {
		d.free = append(d.free, tag)
	}
	st.inflight--
	if st.inflight == 0 && st.addr >= st.end {
		st.onDone(!st.failed)
	}
	d.pump()
}

// engineQueue runs copies in one direction one after another, as a copy
// engine does. One copy runs at a time, so its state lives here, with
// method values made once: a copy allocates nothing.
type engineQueue struct {
	g     *GPU
	queue fifo[copyJob]
	busy  bool
	// The running copy: its job, when it started, the least time it
	// takes (Command.Duration), and the state of its direction.
	cur          copyJob
	start, floor time.Duration
	h2d          h2dCopy
	d2h          d2hCopy
	finishF      func()
	completeF    func()
}

type copyJob struct {
	c    Command
	done func()
	ch   *channel // the channel it runs for; nil outside a channel
}

func (q *engineQueue) push(c Command, done func(), ch *channel) {
	if q.finishF == nil {
		q.finishF, q.completeF = q.finish, q.complete
	}
	q.queue.push(copyJob{c: c, done: done, ch: ch})
	q.next()
}

func (q *engineQueue) next() {
	if q.busy || q.queue.len() == 0 {
		return
	}
	q.cur = q.queue.pop()
	q.busy = true
	q.g.Stats.Copies++
	q.start = q.g.s.Now()
	q.floor = q.start + time.Duration(q.cur.c.Duration)
	if q.cur.c.Dir == DirH2D {
		q.h2d.begin(q.g, q.cur.c, q.finishF, q.cur.ch)
	} else {
		q.d2h.begin(q.g, q.cur.c, q.finishF)
	}
}

// finish ends the running copy once its DMA is done, or at its floor.
func (q *engineQueue) finish() {
	if q.g.s.Now() < q.floor {
		q.g.s.At(q.floor, q.completeF)
		return
	}
	q.complete()
}

func (q *engineQueue) complete() {
	q.g.trace(q.cur.c, q.start, q.g.s.Now())
	q.busy = false
	done := q.cur.done
	q.cur = copyJob{}
	done()
	q.next()
}

// fluidSplit returns how much of an n-byte copy moves as TLPs.
func (g *GPU) fluidSplit(n uint64) uint64 {
	if g.cfg.MaxSimBytes == 0 || g.cfg.HostMemory == nil || n <= g.cfg.MaxSimBytes {
		return n
	}
	return g.cfg.MaxSimBytes
}

// h2dCopy reads host memory by DMA into VRAM: the state of the running
// host-to-device copy.
type h2dCopy struct {
	g              *GPU
	c              Command
	tlpBytes       uint64
	start, half    time.Duration
	got, halfBytes uint64
	done           func()
	ch             *channel // stopped by a failed copy; nil outside a channel
	st             readStream
	onDataF        func(off uint64, b []byte)
	onDoneF        func(ok bool)
}

func (h *h2dCopy) begin(g *GPU, c Command, done func(), ch *channel) {
	if h.onDataF == nil {
		h.onDataF, h.onDoneF = h.onData, h.onDone
	}
	h.g, h.c, h.done, h.ch = g, c, done, ch
	h.tlpBytes = g.fluidSplit(c.Len)
	h.start, h.half, h.got, h.halfBytes = g.s.Now(), 0, 0, 0
	h.st = readStream{addr: c.Src, end: c.Src + h.tlpBytes, onData: h.onDataF, onDone: h.onDoneF}
	g.dma.start(&h.st)
}

func (h *h2dCopy) onData(off uint64, b []byte) {
	h.g.VRAM.Write(h.c.Dst+off, b)
	h.got += uint64(len(b))
	if h.half == 0 && h.got >= h.tlpBytes/2 {
		h.half, h.halfBytes = h.g.s.Now(), h.got
	}
}

func (h *h2dCopy) onDone(ok bool) {
	g, c, tlpBytes := h.g, h.c, h.tlpBytes
	if !ok {
		// A read answered with an error status (a completion timeout
		// comes as CA) left part of the destination unwritten: the
		// channel stops with a fault, as a real GPU raises a channel
		// error, or the driver would take stale VRAM for data (and the
		// semaphores after the copy for its completion).
		if ch := h.ch; ch != nil {
			ch.errors++
			ch.stop(ChannelFault{Reason: FaultCopyRead, Status: h.st.status, Addr: h.st.failAt})
		}
		h.done()
		return
	}
	if h.half <= h.start {
		h.half = h.start
	}
	g.fluidTail(c, tlpBytes, tlpBytes-h.halfBytes, h.half, g.s.Now(), func() {
		g.cfg.HostMemory.Copy(g.VRAM, c.Dst+tlpBytes, c.Src+tlpBytes, c.Len-tlpBytes)
	}, h.done)
}

// fluidTail finishes a long copy functionally: the bytes beyond the
// TLP-level part take rest/rate more, rate being what the TLP-level part
// reached over its second half (bytes between from and to).
func (g *GPU) fluidTail(c Command, tlpBytes uint64, measured uint64, from, to time.Duration, move func(), done func()) {
	rest := c.Len - tlpBytes
	if rest == 0 {
		done()
		return
	}
	rate := float64(measured) / max((to-from).Seconds(), 1e-12)
	move()
	g.Stats.FluidBytes += rest
	g.s.After(time.Duration(float64(rest)/rate*1e9), done)
}

// d2hWindow is how much wire time of posted writes the engine keeps queued:
// it stands for the posted credits of the path.
const d2hWindow = 2 * time.Microsecond

// d2hCopy writes VRAM to host memory with posted writes of at most MPS:
// the state of the running device-to-host copy.
type d2hCopy struct {
	g            *GPU
	c            Command
	tlpBytes     uint64
	half, last   time.Duration
	off, halfOff uint64
	done         func()
	chunk        [4096]byte
	stepF, tailF func()
}

func (d *d2hCopy) begin(g *GPU, c Command, done func()) {
	if d.stepF == nil {
		d.stepF, d.tailF = d.step, d.tail
	}
	d.g, d.c, d.done = g, c, done
	d.tlpBytes = g.fluidSplit(c.Len)
	d.half, d.last, d.off, d.halfOff = 0, 0, 0, 0
	d.step()
}

func (d *d2hCopy) step() {
	g := d.g
	if g.up == nil {
		d.done()
		return
	}
	mps := uint64(mpsOf(g.Cfg))
	for d.off < d.tlpBytes {
		if b := g.up.Backlog(); b > d2hWindow {
			g.s.After(b-d2hWindow, d.stepF)
			return
		}
		addr := d.c.Dst + d.off
		k := min(mps, d.tlpBytes-d.off, 4096-addr%4096)
		g.VRAM.Read(d.c.Src+d.off, d.chunk[:k])
		g.writeHost(addr, d.chunk[:k])
		d.off += k
		// Sends are paced by the path, so their times trace the
		// wire rate.
		d.last = g.s.Now() + g.up.Backlog()
		if d.half == 0 && d.off >= d.tlpBytes/2 {
			d.half, d.halfOff = d.last, d.off
		}
	}
	// Done once the last write has left: its completion is the
	// semaphore release that follows it on the same ordered path.
	g.s.After(g.up.Backlog(), d.tailF)
}

func (d *d2hCopy) tail() {
	g, c, tlpBytes := d.g, d.c, d.tlpBytes
	g.fluidTail(c, tlpBytes, d.off-d.halfOff, d.half, d.last, func() {
		g.VRAM.Copy(g.cfg.HostMemory, c.Dst+tlpBytes, c.Src+tlpBytes, c.Len-tlpBytes)
	}, d.done)
}

// CopyForTest runs a copy on the engine of its direction, outside any
// channel, and calls done when it finishes (tests and tools).
func (g *GPU) CopyForTest(c Command, done func()) {
	if c.Dir == DirH2D {
		g.h2d.push(c, done, nil)
	} else {
		g.d2h.push(c, done, nil)
	}
}
