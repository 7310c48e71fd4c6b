package conform

import (
	"sync"

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
	var p tlp.Packet
	if err := p.Decode(v); err != nil {
		return
	}
	p.Data = append([]byte(nil), p.Data...)
	s.mu.Lock()
	s.got = append(s.got, p)
	var reply []byte
	switch p.Kind {
	case tlp.MWr:
		if off, ok := s.window(p.Address, len(p.Data)); ok {
			copy(s.mem[off:], p.Data)
		}
	case tlp.MRd:
		reply = s.answer(&p)
	}
	s.mu.Unlock()
	if reply != nil {
		s.push(reply)
	}
	s.signal()
}

func (s *Stub) window(addr uint64, n int) (int, bool) {
	if addr < s.base || addr-s.base+uint64(n) > uint64(len(s.mem)) {
		return 0, false
	}
	return int(addr - s.base), true
}

// answer builds the completion of a read (mu held): one CplD, or UR.
func (s *Stub) answer(r *tlp.Packet) []byte {
	v, _ := r.AppendTo(nil)
	req := tlp.View(v)
	c := tlp.Packet{Kind: tlp.CplD, CompleterID: s.id, RequesterID: r.RequesterID, Tag: r.Tag, Attr: r.Attr,
		ByteCount: uint16(req.RequestBytes()), LowerAddress: req.RequestLowerAddress()}
	n := int(r.Length) * 4
	if off, ok := s.window(r.Address, n); ok {
		c.Data = append([]byte(nil), s.mem[off:off+n]...)
	} else {
		c = tlp.Packet{Kind: tlp.Cpl, CompleterID: s.id, RequesterID: r.RequesterID, Tag: r.Tag, Status: tlp.StatusUR,
			ByteCount: c.ByteCount, LowerAddress: c.LowerAddress}
	}
	b, err := c.AppendTo(nil)
	if err != nil {
		return nil
	}
	return b
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
