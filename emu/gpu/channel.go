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
	segs     []*segment // fetched or in flight, in ring order
	queue    []Command  // decoded, waiting to execute
	busy     bool
	cmdBuf   []Command
}

type segment struct {
	done bool
	cmds []Command
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
	first, count := ch.get, end-ch.get
	ch.read(ch.base+uint64(first)*GPEntrySize, int(count)*GPEntrySize, ch.aperture == ApertureVRAM, func(b []byte, ok bool) {
		ch.fetching = false
		if !ok {
			ch.errors++
			ch.g.Stats.Errors++
			return
		}
		ch.get = (first + count) % ch.entries
		refused := false
		for i := 0; i < int(count); i++ {
			e := b[i*GPEntrySize:]
			addr := binary.LittleEndian.Uint64(e)
			n := binary.LittleEndian.Uint32(e[8:])
			flags := binary.LittleEndian.Uint32(e[12:])
			seg := &segment{}
			ch.segs = append(ch.segs, seg)
			if n > MaxSegmentBytes {
				seg.done, refused = true, true
				ch.errors++
				ch.g.Stats.Errors++
				continue
			}
			ch.read(addr, int(n), flags&GPEntryVRAM != 0, func(pb []byte, ok bool) {
				seg.done = true
				if !ok {
					ch.errors++
					ch.g.Stats.Errors++
				} else {
					cmds, err := DecodeCommands(pb, nil)
					if err != nil {
						ch.errors++
						ch.g.Stats.Errors++
					}
					seg.cmds = cmds
				}
				ch.drainSegs()
			})
		}
		if refused {
			// A refused segment completes no read: drain it here.
			ch.drainSegs()
		}
		ch.fetch()
	})
}

// read fetches n bytes of commands at addr: from host memory by DMA reads
// across PCIe, or, with vram, from the GPU's own memory, which the command
// processor reads in Config.LocalFetchLatency without a TLP.
func (ch *channel) read(addr uint64, n int, vram bool, done func(data []byte, ok bool)) {
	g := ch.g
	if !vram {
		g.readHost(addr, n, done)
		return
	}
	mem := g.cfg.Model.MemBytes
	if addr > mem || uint64(n) > mem-addr {
		g.s.After(g.cfg.LocalFetchLatency, func() { done(nil, false) })
		return
	}
	data := make([]byte, n)
	g.VRAM.Read(addr, data)
	g.Stats.LocalFetches++
	g.s.After(g.cfg.LocalFetchLatency, func() { done(data, true) })
}

func (ch *channel) drainSegs() {
	for len(ch.segs) > 0 && ch.segs[0].done {
		ch.queue = append(ch.queue, ch.segs[0].cmds...)
		ch.segs = ch.segs[1:]
	}
	ch.run()
}

// run executes queued commands until one has to wait.
func (ch *channel) run() {
	g := ch.g
	for !ch.busy && len(ch.queue) > 0 {
		c := ch.queue[0]
		ch.queue = ch.queue[1:]
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
			g.s.After(time.Duration(c.Duration), ch.finish)
		case OpKernel:
			ch.busy = true
			g.Stats.Kernels++
			start := g.s.Now() + g.cfg.KernelOverhead
			end := start + time.Duration(c.Duration)
			g.s.At(end, func() {
				g.trace(c, start, end)
				ch.finish()
			})
		case OpCopy:
			ch.busy = true
			switch c.Dir {
			case DirH2D:
				g.h2d.push(c, ch.finish)
			case DirD2H:
				g.d2h.push(c, ch.finish)
			default:
				d := time.Duration(c.Duration)
				if d == 0 {
					d = time.Duration(float64(2*c.Len) / g.cfg.VRAMBytesPerSec * 1e9)
				}
				g.VRAM.Copy(g.VRAM, c.Dst, c.Src, c.Len)
				g.timed(c, d, ch.finish)
			}
		case OpMemset:
			ch.busy = true
			d := time.Duration(c.Duration)
			if d == 0 {
				d = time.Duration(float64(c.Len) / g.cfg.VRAMBytesPerSec * 1e9)
			}
			g.VRAM.Fill(c.Dst, byte(c.Value), c.Len)
			g.timed(c, d, ch.finish)
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
	var ready []*channel
	for _, w := range g.waiters {
		if g.VRAM.Uint64(w.addr) >= w.value {
			ready = append(ready, w.ch)
		} else {
			keep = append(keep, w)
		}
	}
	g.waiters = keep
	for _, ch := range ready {
		ch.finish()
	}
}

// Idle reports whether no channel has work fetched, queued or running.
func (g *GPU) Idle() bool {
	for _, ch := range g.chans {
		if ch.busy || len(ch.queue) > 0 || len(ch.segs) > 0 || ch.fetching || ch.get != ch.put {
			return false
		}
	}
	return true
}

// timed finishes a GPU-local operation after d.
func (g *GPU) timed(c Command, d time.Duration, done func()) {
	start := g.s.Now()
	g.s.After(d, func() {
		g.trace(c, start, g.s.Now())
		done()
	})
}

func (g *GPU) trace(c Command, start, end time.Duration) {
	if g.OnOp != nil {
		g.OnOp(c, start, end)
	}
}
