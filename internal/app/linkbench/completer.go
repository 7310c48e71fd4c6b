package linkbench

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/tlp"
)

// completer is the GPU side's stub device: it answers reads with
// completions split at MPS and a 64-byte RCB, as a device's completer
// does, in the runner's turn that delivered them (driver.Runner.Reply),
// so that a read's round trip carries no goroutine wake-up. What the
// bridge cannot take at once (its queue or window full) waits in a
// backlog that run's goroutine hands over, in order: a read's completions
// are built together, so the ones deferred are the tail of one read's and
// all of the later reads'. A later turn's answers may overtake them:
// completions of different transactions have no order to keep.
type completer struct {
	gpu  *driver.Runner
	mps  int
	data []byte // the payload every completion carries

	// Under the GPU runner's lock (the runner's callbacks).
	pend  []reqHdr
	store []byte
	cpls  [][]byte
	// shapes holds the completions of each shape of request met (kind,
	// length, address within its 4 KiB), back to back with tag and
	// requester ID zero: a request's are a copy with those two patched,
	// as a device's completer fills in a header, not a Packet encoded and
	// checked per completion.
	shapes map[uint32]cplShape

	mu      sync.Mutex
	backlog []byte // completions, back to back
	lens    []int
	// deferred counts the completions that went through the backlog.
	deferred atomic.Uint64
	wake     chan struct{}
}

func newCompleter(gpu *driver.Runner, mps int) *completer {
	return &completer{gpu: gpu, mps: min(mps, 4096), data: make([]byte, 4096), wake: make(chan struct{}, 1), shapes: map[uint32]cplShape{}}
}

// maxShapes bounds the shapes kept (a run has one or two).
const maxShapes = 64

// cplShape is the completions of one shape of request.
type cplShape struct {
	blob []byte
	lens []int
}

// request takes a read request's header (OnTLP).
func (c *completer) request(v tlp.View) {
	var r reqHdr
	r.n = uint8(copy(r.b[:], v[:min(len(v), v.HeaderLen())]))
	c.pend = append(c.pend, r)
}

// answer builds the completions of the requests delivered in this turn and
// hands them to the bridge (OnDelivered).
func (c *completer) answer() {
	if len(c.pend) == 0 {
		return
	}
	c.store, c.cpls = c.store[:0], c.cpls[:0]
	for i := range c.pend {
		c.complete(tlp.View(c.pend[i].b[:c.pend[i].n]))
	}
	c.pend = c.pend[:0]
	n, _ := c.gpu.Reply(c.cpls) // ErrBusy or not up: the rest waits
	if n == len(c.cpls) {
		return
	}
	c.mu.Lock()
	for _, p := range c.cpls[n:] {
		c.backlog = append(c.backlog, p...)
		c.lens = append(c.lens, len(p))
	}
	c.deferred.Add(uint64(len(c.cpls) - n))
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// complete appends req's completions to c.cpls.
func (c *completer) complete(req tlp.View) {
	key := uint32(req.Length())<<12 | uint32(req.Address()&0xfff)
	if req.Kind() == tlp.CfgRd0 {
		key = 1 << 31
	}
	sh, ok := c.shapes[key]
	if !ok {
		if len(c.shapes) >= maxShapes {
			clear(c.shapes)
		}
		sh = c.shape(req)
		c.shapes[key] = sh
	}
	off := 0
	for _, n := range sh.lens {
		at := len(c.store)
		c.store = append(c.store, sh.blob[off:off+n]...)
		off += n
		v := tlp.View(c.store[at:len(c.store):len(c.store)])
		v.SetTag(req.Tag())
		v.SetRequesterID(req.RequesterID())
		c.cpls = append(c.cpls, v)
	}
}

// shape builds the completions of a request shaped like req: split at MPS
// and a 64-byte RCB, tag and requester ID zero.
func (c *completer) shape(req tlp.View) cplShape {
	var sh cplShape
	add := func(p *tlp.Packet) {
		at := len(sh.blob)
		sh.blob, _ = p.AppendTo(sh.blob)
		sh.lens = append(sh.lens, len(sh.blob)-at)
	}
	if req.Kind() == tlp.CfgRd0 {
		add(&tlp.Packet{Kind: tlp.CplD, CompleterID: tlp.NewID(1, 0, 0), ByteCount: 4, Data: c.data[:4]})
		return sh
	}
	sp, err := tlp.SplitterFor(req, c.mps, 64)
	if err != nil {
		return sh // no completion: the requester's bridge answers CA
	}
	for {
		part, ok := sp.Next()
		if !ok {
			return sh
		}
		add(&tlp.Packet{Kind: tlp.CplD, CompleterID: tlp.NewID(1, 0, 0),
			ByteCount: uint16(part.ByteCount), LowerAddress: part.LowerAddress, Data: c.data[:part.Length*4]})
	}
}

// run hands the backlog over until ctx ends.
func (c *completer) run(ctx context.Context) {
	var buf []byte
	var lens []int
	var views [][]byte
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		}
		for {
			c.mu.Lock()
			if len(c.lens) == 0 {
				c.mu.Unlock()
				break
			}
			buf, c.backlog = c.backlog, buf[:0]
			lens, c.lens = c.lens, lens[:0]
			c.mu.Unlock()
			views = views[:0]
			for off, i := 0, 0; i < len(lens); i++ {
				views = append(views, buf[off:off+lens[i]])
				off += lens[i]
			}
			c.send(ctx, views)
		}
	}
}

// send hands views over, waiting for room, until ctx ends; with the
// bridge not up it drops them (the requester's bridge answers for them).
func (c *completer) send(ctx context.Context, views [][]byte) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for len(views) > 0 {
		n, err := c.gpu.SendMany(views)
		views = views[n:]
		if err == nil {
			continue
		}
		if !errors.Is(err, bridge.ErrBusy) || ctx.Err() != nil {
			return
		}
		t.Reset(100 * time.Microsecond)
		select {
		case <-c.gpu.Progress:
		case <-t.C:
		}
	}
}
