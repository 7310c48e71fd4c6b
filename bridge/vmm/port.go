package vmm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// Errors callers match.
var (
	ErrConfig = errors.New("vmm: bad configuration")
	// ErrBusy is a guest access begun while another waits for its
	// completion: a VMM front serializes the accesses of one function.
	ErrBusy = errors.New("vmm: an access is already waiting for its completion")
	// ErrNoBAR is a BAR access outside every window the guest placed.
	ErrNoBAR = errors.New("vmm: BAR access outside the function's BARs")
	// ErrAccess is a malformed guest access (size, alignment).
	ErrAccess = errors.New("vmm: malformed access")
)

// AllOnes is what a read gets when the function does not answer: a
// completion timeout, Unsupported Request, Completer Abort, a removed
// device. Real root complexes return the same.
const AllOnes = ^uint64(0)

// Config configures a Port.
type Config struct {
	// Device is the remote function's routing ID as the wire carries it
	// (config requests are addressed to it); default 03:00.0.
	Device tlp.ID
	// Requester is the ID the port's requests carry (the guest's root
	// complex); default 00:00.0. The device's DMA completions carry it as
	// completer ID.
	Requester tlp.ID
	// BARs are the windows the guest sees, and where each lands on the
	// device.
	BARs [numBARs]BAR
	// MPS and RCB shape the completions of the device's DMA reads from
	// guest RAM (defaults 256 and 64).
	MPS, RCB int
	// CompletionTimeout bounds how long a guest access waits for its
	// completion (default 50 ms, PCIe's default range A); then the guest
	// reads all ones.
	CompletionTimeout time.Duration
}

// Access is one guest access handed over by the VMM.
type Access struct {
	Op   Op
	Addr uint64 // config offset, or guest-physical address for BARs
	Size int    // 1, 2, 4 (config); 1, 2, 4 or 8 (BAR)
	Val  uint64 // the value written
}

// Op is the kind of a guest access.
type Op uint8

// The guest accesses a VMM forwards.
const (
	CfgRead Op = iota
	CfgWrite
	BarRead
	BarWrite
)

func (o Op) String() string {
	return [...]string{"config read", "config write", "BAR read", "BAR write"}[o]
}

// Stats count what the port did; safe to read at any time.
type Stats struct {
	CfgReads, CfgWrites, BarReads, BarWrites atomic.Uint64
	// ShadowAccesses were answered from the BAR shadow.
	ShadowAccesses atomic.Uint64
	// NoBAR counts BAR accesses outside every placed window.
	NoBAR atomic.Uint64
	// Timeouts, Errors: accesses answered all ones (no completion in
	// time; UR/CA/CRS or a poisoned completion).
	Timeouts, ErrorCompletions atomic.Uint64
	// Unexpected counts completions that match nothing outstanding.
	Unexpected atomic.Uint64
	// DMAReads, DMAWrites: the device's requests served from guest RAM;
	// DMAOutside those refused for lying outside it (UR for reads).
	DMAReads, DMAWrites, DMAOutside atomic.Uint64
	// Interrupts counts MSI writes from the device, which the proxy
	// protocol cannot deliver (see the package doc).
	Interrupts atomic.Uint64
}

// Port is the device-facing core of a VMM front, sans-I/O: it turns the
// guest's config and BAR accesses into TLPs for the host-side bridge and
// the bridge's TLPs into answers, and serves the device's DMA from guest
// RAM. It keeps one access outstanding (the VMM waits on each). Not safe
// for concurrent use: the driver serializes calls.
type Port struct {
	cfg     Config
	shadow  *shadow
	ram     *GuestRAM
	dma     *nettlp.Completer
	dmaStat nettlp.Stats
	stats   Stats
	tag     uint16
	pending pending
	buf     []byte
}

type pending struct {
	active   bool
	op       Op
	tag      uint16
	shift    int // byte offset of the access in the completion's data
	size     int
	deadline time.Duration
}

// NewPort returns a port serving ram for the device's DMA.
func NewPort(cfg Config, ram *GuestRAM) (*Port, error) {
	if ram == nil {
		return nil, fmt.Errorf("%w: NewPort needs guest RAM", ErrConfig)
	}
	if cfg.Device == 0 {
		cfg.Device = tlp.NewID(3, 0, 0)
	}
	if cfg.CompletionTimeout == 0 {
		cfg.CompletionTimeout = 50 * time.Millisecond
	}
	if cfg.CompletionTimeout < 0 {
		return nil, fmt.Errorf("%w: completion timeout %s", ErrConfig, sim.FormatDuration(cfg.CompletionTimeout))
	}
	s, err := newShadow(cfg.BARs)
	if err != nil {
		return nil, err
	}
	p := &Port{cfg: cfg, shadow: s, ram: ram}
	p.dma, err = nettlp.NewCompleter(nettlp.CompleterConfig{MPS: cfg.MPS, RCB: cfg.RCB, CompleterID: cfg.Requester}, ram, 0, &p.dmaStat)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return p, nil
}

// Stats returns the port's counters.
func (p *Port) Stats() *Stats { return &p.stats }

// Step is what Begin decided: either the answer (Done) or a TLP to send,
// after which the answer comes from Receive or Expire.
type Step struct {
	Done  bool
	Value uint64 // the answer when Done (0 for writes)
	TLP   []byte // the request to send when !Done; valid until the next call
}

// Begin starts guest access a at time now.
func (p *Port) Begin(now time.Duration, a Access) (Step, error) {
	if p.pending.active {
		return Step{}, ErrBusy
	}
	switch a.Op {
	case CfgRead, CfgWrite:
		return p.config(now, a)
	case BarRead, BarWrite:
		return p.bar(now, a)
	}
	return Step{}, fmt.Errorf("%w: op %d", ErrAccess, a.Op)
}

func (p *Port) config(now time.Duration, a Access) (Step, error) {
	if (a.Size != 1 && a.Size != 2 && a.Size != 4) || a.Addr+uint64(a.Size) > 4096 || a.Addr%uint64(a.Size) != 0 {
		return Step{}, fmt.Errorf("%w: %v of %d bytes at config offset %#x", ErrAccess, a.Op, a.Size, a.Addr)
	}
	reg, shift := uint32(a.Addr)&^3, int(a.Addr&3)
	be := uint8((1<<a.Size)-1) << shift
	mask := uint64(1)<<(8*a.Size) - 1
	if owns(reg) {
		p.stats.ShadowAccesses.Add(1)
		if a.Op == CfgRead {
			return Step{Done: true, Value: uint64(p.shadow.read(reg)>>(8*shift)) & mask}, nil
		}
		p.shadow.write(reg, be, uint32(a.Val&mask)<<(8*shift))
		return Step{Done: true}, nil
	}
	pk := tlp.Packet{Kind: tlp.CfgRd0, RequesterID: p.cfg.Requester, TargetID: p.cfg.Device, Register: uint16(reg), FirstBE: be, Length: 1}
	if a.Op == CfgRead {
		p.stats.CfgReads.Add(1)
	} else {
		p.stats.CfgWrites.Add(1)
		pk.Kind = tlp.CfgWr0
		var d [4]byte
		binary.LittleEndian.PutUint32(d[:], uint32(a.Val&mask)<<(8*shift))
		pk.Data = d[:]
	}
	return p.issue(now, a, pk, shift)
}

func (p *Port) bar(now time.Duration, a Access) (Step, error) {
	if a.Size != 1 && a.Size != 2 && a.Size != 4 && a.Size != 8 {
		return Step{}, fmt.Errorf("%w: %v of %d bytes at %#x", ErrAccess, a.Op, a.Size, a.Addr)
	}
	_, dev, ok := p.shadow.decode(a.Addr, a.Size)
	if !ok {
		p.stats.NoBAR.Add(1)
		if a.Op == BarRead {
			return Step{Done: true, Value: AllOnes >> (64 - 8*a.Size)}, fmt.Errorf("%w: %d bytes at %#x", ErrNoBAR, a.Size, a.Addr)
		}
		return Step{Done: true}, fmt.Errorf("%w: %d bytes at %#x", ErrNoBAR, a.Size, a.Addr)
	}
	start, shift := dev&^3, int(dev&3)
	dws := (shift + a.Size + 3) / 4
	first, last := byteEnables(shift, a.Size, dws)
	pk := tlp.Packet{Kind: tlp.MRd, RequesterID: p.cfg.Requester, Address: start, Length: uint16(dws), FirstBE: first, LastBE: last}
	if a.Op == BarWrite {
		p.stats.BarWrites.Add(1)
		pk.Kind = tlp.MWr
		var d [12]byte
		binary.LittleEndian.PutUint64(d[shift:], a.Val)
		pk.Data = d[:dws*4]
		// Bytes outside the access are disabled; keep them zero.
		for i := shift + a.Size; i < dws*4; i++ {
			d[i] = 0
		}
		var err error
		if p.buf, err = pk.AppendTo(p.buf[:0]); err != nil {
			return Step{}, fmt.Errorf("vmm: building %v: %w", a.Op, err)
		}
		return Step{TLP: p.buf, Done: true}, nil // posted: no completion
	}
	p.stats.BarReads.Add(1)
	return p.issue(now, a, pk, shift)
}

// byteEnables returns First and Last BE for n bytes at byte offset shift of
// a dws-DW span.
func byteEnables(shift, n, dws int) (first, last uint8) {
	if dws == 1 {
		return uint8((1<<n)-1) << shift, 0
	}
	first = uint8(0xf<<shift) & 0xf
	end := (shift + n) % 4
	last = 0xf
	if end != 0 {
		last = uint8(1<<end) - 1
	}
	return first, last
}

// issue builds a non-posted request with a fresh tag and makes it pending.
func (p *Port) issue(now time.Duration, a Access, pk tlp.Packet, shift int) (Step, error) {
	p.tag = (p.tag + 1) & 0xff
	pk.Tag = p.tag
	var err error
	if p.buf, err = pk.AppendTo(p.buf[:0]); err != nil {
		return Step{}, fmt.Errorf("vmm: building %v: %w", a.Op, err)
	}
	p.pending = pending{active: true, op: a.Op, tag: p.tag, shift: shift, size: a.Size, deadline: now + p.cfg.CompletionTimeout}
	return Step{TLP: p.buf}, nil
}

// Answer is the outcome of a pending access.
type Answer struct {
	Done  bool
	Value uint64
	// Err says why a read got all ones (timeout, completion status).
	Err error
}

// Deadline returns when the pending access times out, if one is pending.
func (p *Port) Deadline() (time.Duration, bool) {
	return p.pending.deadline, p.pending.active
}

// Expire answers the pending access with all ones if its deadline has
// passed at now.
func (p *Port) Expire(now time.Duration) Answer {
	if !p.pending.active || now < p.pending.deadline {
		return Answer{}
	}
	p.stats.Timeouts.Add(1)
	return p.fail(fmt.Errorf("vmm: %v: no completion within %s", p.pending.op, sim.FormatDuration(p.cfg.CompletionTimeout)))
}

// Abort answers the pending access with all ones at once: the link went
// down or the device was removed.
func (p *Port) Abort(why error) Answer {
	if !p.pending.active {
		return Answer{}
	}
	p.stats.ErrorCompletions.Add(1)
	return p.fail(why)
}

func (p *Port) fail(why error) Answer {
	pd := p.pending
	p.pending = pending{}
	v := AllOnes >> (64 - 8*pd.size)
	if pd.op == CfgWrite {
		v = 0
	}
	return Answer{Done: true, Value: v, Err: why}
}

// Receive handles one TLP the bridge delivered: the completion of the
// pending access (its answer), or a DMA request of the device, served from
// guest RAM with completions handed to emit in order. emit's slice is
// reused after it returns.
func (p *Port) Receive(v tlp.View, emit func([]byte) error) (Answer, error) {
	switch v.Kind() {
	case tlp.Cpl, tlp.CplD:
		return p.completion(v), nil
	case tlp.MWr:
		if v.Address()&0xffff_ffff_fff0_0000 == 0xfee0_0000 {
			p.stats.Interrupts.Add(1)
			return Answer{}, nil
		}
		err := p.dma.Handle(v, emit)
		p.countDMA(&p.stats.DMAWrites, err)
		return Answer{}, err
	case tlp.MRd:
		err := p.dma.Handle(v, emit)
		p.countDMA(&p.stats.DMAReads, err)
		return Answer{}, err
	}
	// Anything else non-posted gets UR from the completer; messages and
	// the rest are dropped there and counted.
	return Answer{}, p.dma.Handle(v, emit)
}

func (p *Port) countDMA(c *atomic.Uint64, err error) {
	if errors.Is(err, nettlp.ErrOutOfRange) {
		p.stats.DMAOutside.Add(1)
		return
	}
	c.Add(1)
}

func (p *Port) completion(v tlp.View) Answer {
	pd := p.pending
	if !pd.active || v.Tag() != pd.tag || v.RequesterID() != p.cfg.Requester {
		p.stats.Unexpected.Add(1)
		return Answer{}
	}
	if st := v.Status(); st != tlp.StatusSC || v.EP() {
		p.stats.ErrorCompletions.Add(1)
		return p.fail(fmt.Errorf("vmm: %v: completion status %v (poisoned %v)", pd.op, st, v.EP()))
	}
	if pd.op == CfgWrite {
		p.pending = pending{}
		return Answer{Done: true}
	}
	data := v.Payload()
	if len(data) < pd.shift+pd.size {
		p.stats.ErrorCompletions.Add(1)
		return p.fail(fmt.Errorf("vmm: %v: completion carries %d bytes, want %d", pd.op, len(data), pd.shift+pd.size))
	}
	var b [8]byte
	copy(b[:], data[pd.shift:pd.shift+pd.size])
	p.pending = pending{}
	return Answer{Done: true, Value: binary.LittleEndian.Uint64(b[:])}
}
