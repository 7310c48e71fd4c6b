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
	hi, lo   []*readStream // waiting streams: command fetches first
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
		d.hi = append(d.hi, st)
	} else {
		d.lo = append(d.lo, st)
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
		case len(d.hi) > 0:
			st = d.hi[0]
		case len(d.lo) > 0:
			st = d.lo[0]
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
				d.hi = d.hi[1:]
			} else {
				d.lo = d.lo[1:]
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

// readHost reads n bytes of host memory and calls done with them.
func (g *GPU) readHost(addr uint64, n int, done func(data []byte, ok bool)) {
	data := make([]byte, n)
	g.dma.start(&readStream{addr: addr, end: addr + uint64(n), priority: true,
		onData: func(off uint64, b []byte) { copy(data[off:], b) },
		onDone: func(ok bool) { done(data, ok) }})
}

// engineQueue runs copies in one direction one after another, as a copy
// engine does.
type engineQueue struct {
	g     *GPU
	queue []*copyJob
	busy  bool
}

type copyJob struct {
	c    Command
	done func()
}

func (q *engineQueue) push(c Command, done func()) {
	q.queue = append(q.queue, &copyJob{c: c, done: done})
	q.next()
}

func (q *engineQueue) next() {
	if q.busy || len(q.queue) == 0 {
		return
	}
	j := q.queue[0]
	q.queue = q.queue[1:]
	q.busy = true
	q.g.Stats.Copies++
	start := q.g.s.Now()
	floor := start + time.Duration(j.c.Duration)
	finish := func() {
		end := q.g.s.Now()
		complete := func() {
			q.g.trace(j.c, start, q.g.s.Now())
			q.busy = false
			j.done()
			q.next()
		}
		if end < floor {
			q.g.s.At(floor, complete)
			return
		}
		complete()
	}
	if j.c.Dir == DirH2D {
		q.g.copyH2D(j.c, finish)
	} else {
		q.g.copyD2H(j.c, finish)
	}
}

// fluidSplit returns how much of an n-byte copy moves as TLPs.
func (g *GPU) fluidSplit(n uint64) uint64 {
	if g.cfg.MaxSimBytes == 0 || g.cfg.HostMemory == nil || n <= g.cfg.MaxSimBytes {
		return n
	}
	return g.cfg.MaxSimBytes
}

// copyH2D reads host memory by DMA into VRAM.
func (g *GPU) copyH2D(c Command, done func()) {
	tlpBytes := g.fluidSplit(c.Len)
	start := g.s.Now()
	var half time.Duration
	var got, halfBytes uint64
	g.dma.start(&readStream{addr: c.Src, end: c.Src + tlpBytes,
		onData: func(off uint64, b []byte) {
			g.VRAM.Write(c.Dst+off, b)
			got += uint64(len(b))
			if half == 0 && got >= tlpBytes/2 {
				half, halfBytes = g.s.Now(), got
			}
		},
		onDone: func(ok bool) {
			if !ok {
				done()
				return
			}
			if half <= start {
				half = start
			}
			g.fluidTail(c, tlpBytes, tlpBytes-halfBytes, half, g.s.Now(), func() {
				g.cfg.HostMemory.Copy(g.VRAM, c.Dst+tlpBytes, c.Src+tlpBytes, c.Len-tlpBytes)
			}, done)
		}})
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

// copyD2H writes VRAM to host memory with posted writes of at most MPS.
func (g *GPU) copyD2H(c Command, done func()) {
	tlpBytes := g.fluidSplit(c.Len)
	var half, last time.Duration
	var off, halfOff uint64
	chunk := make([]byte, 4096)
	var step func()
	step = func() {
		if g.up == nil {
			done()
			return
		}
		mps := uint64(mpsOf(g.Cfg))
		for off < tlpBytes {
			if b := g.up.Backlog(); b > d2hWindow {
				g.s.After(b-d2hWindow, step)
				return
			}
			addr := c.Dst + off
			k := min(mps, tlpBytes-off, 4096-addr%4096)
			g.VRAM.Read(c.Src+off, chunk[:k])
			g.writeHost(addr, chunk[:k])
			off += k
			// Sends are paced by the path, so their times trace the
			// wire rate.
			last = g.s.Now() + g.up.Backlog()
			if half == 0 && off >= tlpBytes/2 {
				half, halfOff = last, off
			}
		}
		// Done once the last write has left: its completion is the
		// semaphore release that follows it on the same ordered path.
		wait := g.up.Backlog()
		g.s.After(wait, func() {
			g.fluidTail(c, tlpBytes, off-halfOff, half, last, func() {
				g.VRAM.Copy(g.cfg.HostMemory, c.Dst+tlpBytes, c.Src+tlpBytes, c.Len-tlpBytes)
			}, done)
		})
	}
	step()
}

// CopyForTest runs a copy on the engine of its direction, outside any
// channel, and calls done when it finishes (tests and tools).
func (g *GPU) CopyForTest(c Command, done func()) {
	if c.Dir == DirH2D {
		g.h2d.push(c, done)
	} else {
		g.d2h.push(c, done)
	}
}
