package conform

import (
	"slices"
	"sync"

	"github.com/dxpu/dxpu/bridge/nettlpside"
	"github.com/dxpu/dxpu/tlp"
)

// Stub is a local PCIe side the kit controls, for testing a bridge in
// process: memory that answers reads and takes writes, a record of every
// TLP the bridge delivered, and a source of requests the kit makes the
// bridge forward. Wire it to the bridge's runner: Deliver from its TLP
// callback (it never blocks), and hand everything from Out to the bridge,
// in order. Safe for concurrent use.
type Stub struct {
	id     tlp.ID
	base   uint64
	out    chan []byte
	notify chan struct{}

	mu       sync.Mutex
	mem      []byte
	got      []tlp.Packet
	overflow int

	// Broken behaviours, for the kit's own tests: each breaks one rule.
	splitSmall   bool   // split even a read that fits one completion (TAG-6)
	reverseSplit bool   // send a split read's completions last first (ORD-5)
	swapWrites   bool   // apply each write after the next one (ORD-1)
	heldWrite    []byte // with swapWrites: the write not applied yet
	heldAddr     uint64

	db *nettlpside.Doorbell // the test target, when enabled
}

// EnableDoorbell puts the test target of docs/protocol.md (12.1) at addr
// of the stub's memory, as an implementation outside the process offers
// it: the kit then judges through it (Options.Doorbell) without
// controlling the stub. Call before the bridge runs.
func (s *Stub) EnableDoorbell(addr uint64) {
	s.db = nettlpside.NewDoorbell(addr, s.id, func(a uint64, b []byte) {
		s.mu.Lock()
		s.apply(a, b)
		s.mu.Unlock()
	})
}

// NewStub returns a stub with routing ID id and size bytes of memory at
// base.
func NewStub(id tlp.ID, base uint64, size int) *Stub {
	return &Stub{id: id, base: base, mem: make([]byte, size), out: make(chan []byte, 4096), notify: make(chan struct{}, 1)}
}

// ID returns the stub's routing ID (requester of its requests, completer
// of its completions).
func (s *Stub) ID() tlp.ID { return s.id }

// Out delivers the TLPs the stub sends into the bridge: completions of
// the requests it got, and the requests the kit makes it issue.
func (s *Stub) Out() <-chan []byte { return s.out }

// Deliver takes a TLP the bridge hands to its local side: a write updates
// the memory, a read is answered (UR outside the memory), everything is
// recorded. The view is not kept.
func (s *Stub) Deliver(v tlp.View) {
	if s.db != nil {
		issue, consumed := s.db.Take(v)
		for _, r := range issue {
			s.push(r)
		}
		if consumed {
			s.signal()
			return
		}
	}
	var p tlp.Packet
	if err := p.Decode(v); err != nil {
		return
	}
	p.Data = append([]byte(nil), p.Data...)
	s.mu.Lock()
	s.got = append(s.got, p)
	var reply [][]byte
	switch p.Kind {
	case tlp.MWr:
		s.write(p.Address, p.Data)
	case tlp.MRd:
		reply = s.answer(&p)
	}
	s.mu.Unlock()
	for _, r := range reply {
		s.push(r)
	}
	s.signal()
}

func (s *Stub) window(addr uint64, n int) (int, bool) {
	if addr < s.base || addr-s.base+uint64(n) > uint64(len(s.mem)) {
		return 0, false
	}
	return int(addr - s.base), true
}

// write applies a write to the memory (mu held).
func (s *Stub) write(addr uint64, data []byte) {
	if s.swapWrites {
		if s.heldWrite == nil {
			s.heldWrite, s.heldAddr = data, addr
			return
		}
		held, at := s.heldWrite, s.heldAddr
		s.heldWrite = nil
		defer s.apply(at, held)
	}
	s.apply(addr, data)
}

func (s *Stub) apply(addr uint64, data []byte) {
	if off, ok := s.window(addr, len(data)); ok {
		copy(s.mem[off:], data)
	}
}

// stubMPS and stubRCB shape the stub's completions as a device's: a read
// of up to MPS bytes gets one completion, a larger one is split on RCB
// multiples (TAG-6, ORD-5).
const (
	stubMPS = 256
	stubRCB = 64
)

// answer builds the completions of a read (mu held): CplDs, or one UR.
func (s *Stub) answer(r *tlp.Packet) [][]byte {
	v, _ := r.AppendTo(nil)
	req := tlp.View(v)
	n := int(r.Length) * 4
	off, ok := s.window(r.Address, n)
	if !ok {
		c := tlp.Packet{Kind: tlp.Cpl, CompleterID: s.id, RequesterID: r.RequesterID, Tag: r.Tag, Status: tlp.StatusUR,
			ByteCount: uint16(req.RequestBytes()), LowerAddress: req.RequestLowerAddress()}
		b, err := c.AppendTo(nil)
		if err != nil {
			return nil
		}
		return [][]byte{b}
	}
	if s.splitSmall {
		// One DW per completion, whatever the size.
		var out [][]byte
		for i := 0; i < n; i += 4 {
			c := tlp.Packet{Kind: tlp.CplD, CompleterID: s.id, RequesterID: r.RequesterID, Tag: r.Tag, Attr: r.Attr,
				ByteCount: uint16(n - i), LowerAddress: uint8(r.Address+uint64(i)) & 0x7f, Data: append([]byte(nil), s.mem[off+i:off+i+4]...)}
			if b, err := c.AppendTo(nil); err == nil {
				out = append(out, b)
			}
		}
		return out
	}
	mps, rcb := stubMPS, stubRCB
	if n <= mps {
		mps, rcb = 4096, 4096 // one completion
	}
	sp, err := tlp.NewCplSplitter(r.Address, int(r.Length), r.FirstBE, r.LastBE, mps, rcb)
	if err != nil {
		return nil
	}
	var out [][]byte
	for part, more := sp.Next(); more; part, more = sp.Next() {
		c := tlp.Packet{Kind: tlp.CplD, CompleterID: s.id, RequesterID: r.RequesterID, Tag: r.Tag, Attr: r.Attr,
			ByteCount: uint16(part.ByteCount), LowerAddress: part.LowerAddress}
		from := off + int(part.Address&^3-r.Address)
		c.Data = append([]byte(nil), s.mem[from:from+4*part.Length]...)
		b, err := c.AppendTo(nil)
		if err != nil {
			return nil
		}
		out = append(out, b)
	}
	if s.reverseSplit {
		slices.Reverse(out)
	}
	return out
}

func (s *Stub) push(b []byte) {
	select {
	case s.out <- b:
	default:
		s.mu.Lock()
		s.overflow++
		s.mu.Unlock()
	}
}

func (s *Stub) signal() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// issue makes the stub send t into the bridge.
func (s *Stub) issue(t []byte) { s.push(t) }

// received returns a copy of what the bridge delivered so far.
func (s *Stub) received() []tlp.Packet {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]tlp.Packet(nil), s.got...)
}

// completions returns the completions delivered for tag, in order.
func (s *Stub) completions(tag uint16) []tlp.Packet {
	var out []tlp.Packet
	for _, p := range s.received() {
		if p.Kind.IsCompletion() && p.Tag == tag {
			out = append(out, p)
		}
	}
	return out
}
