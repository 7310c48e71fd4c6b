package host

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// Errors the host returns to callers.
var (
	ErrUR      = errors.New("host: unsupported request (no device answered)")
	ErrCA      = errors.New("host: completer abort")
	ErrNoRoute = errors.New("host: no root port routes this request")
	ErrTimeout = errors.New("host: completion timeout")
	ErrNoTags  = errors.New("host: all request tags in use")
)

// MSI address range on x86: writes there are interrupts, not memory.
const (
	MSIBase  = 0xfee00000
	MSILimit = 0xfeefffff
)

// Config tunes the root complex.
type Config struct {
	// MemLatency is how long a DMA read waits for host DRAM before its
	// completions leave the root complex.
	MemLatency time.Duration
	// RCB is the root complex's read completion boundary (64 or 128).
	RCB int
	// CompletionTimeout bounds how long a CPU request waits.
	CompletionTimeout time.Duration
}

// Stats counts the root complex's traffic.
type Stats struct {
	DMAReads, DMAReadBytes   uint64
	DMAWrites, DMAWriteBytes uint64
	MSIs                     uint64
	CfgRequests              uint64
	MMIOReads, MMIOWrites    uint64
	URs                      uint64
}

// RootComplex is an emulated host: DRAM, root ports, and the CPU's view of
// PCIe (config and MMIO accesses, interrupts).
type RootComplex struct {
	s     *sim.Sim
	cfg   Config
	Mem   *pcie.Memory
	Ports []*RootPortFn
	// reqs holds the CPU's requests in flight, one slot per tag, reused
	// so that a request allocates nothing.
	reqs  [256]request
	next  uint8
	calls callPool
	watch watches
	// OnMSI is called for every MSI write with its data.
	OnMSI func(data uint32)
	// OnRemove is called when a device disappears (surprise removal).
	OnRemove func(d *Device)
	// Devices are the endpoints found by the last enumeration, plus
	// hot-added ones.
	Devices []*Device
	enum    *enumState
	Stats   Stats
	buf     []byte
	brk     uint64
	drv     Driver
	reads   dmaReads
}

// RootPortFn is a root port of the root complex (bus 0) and the link below it.
type RootPortFn struct {
	*Port
	rc   *RootComplex
	down pcie.Sender
	dev  uint8
}

// New returns a root complex with no root ports.
func New(s *sim.Sim, cfg Config) *RootComplex {
	if cfg.MemLatency == 0 {
		cfg.MemLatency = 250 * time.Nanosecond
	}
	if cfg.RCB == 0 {
		cfg.RCB = 64
	}
	if cfg.CompletionTimeout == 0 {
		cfg.CompletionTimeout = 50 * time.Millisecond
	}
	rc := &RootComplex{s: s, cfg: cfg, Mem: pcie.NewMemory()}
	rc.reads.answerF = rc.answerRead
	for i := range rc.reqs {
		r := &rc.reqs[i]
		r.rc, r.tag = rc, uint16(i)
		r.timeoutF, r.mmioF = r.timeout, r.mmioCompletion
	}
	return rc
}

// Sim returns the simulator the host runs on.
func (rc *RootComplex) Sim() *sim.Sim { return rc.s }

// AddRootPort adds a root port (00:NN.0) connected through path to dev, and
// returns the sender dev uses towards the host.
func (rc *RootComplex) AddRootPort(path pcie.Path, dev pcie.Receiver) (pcie.Sender, error) {
	if len(rc.Ports) >= 31 {
		return nil, fmt.Errorf("host: at most 31 root ports")
	}
	n := len(rc.Ports) + 1
	rp := &RootPortFn{Port: NewPort(RootPort, RootPortVendor, RootPortDevice, n, true), rc: rc, dev: uint8(n)}
	down, up := path.Connect(rp, dev)
	rp.down = down
	rp.SetLinkUp(true)
	rc.Ports = append(rc.Ports, rp)
	return up, nil
}

// ReceiveTLP handles a TLP arriving at the root port from below.
func (rp *RootPortFn) ReceiveTLP(v tlp.View) {
	rc := rp.rc
	if !pcie.Valid(v) {
		return
	}
	switch k := v.Kind(); {
	case k == tlp.MRd:
		rc.dmaRead(rp, v)
	case k == tlp.MWr:
		rc.dmaWrite(v)
	case k.IsCompletion():
		rc.completion(v)
	case k.IsNonPosted():
		rc.Stats.URs++
		rc.buf = pcie.AppendCpl(rc.buf[:0], 0, v.RequesterID(), v.Tag(), tlp.StatusUR, 4)
		rp.down.SendTLP(rc.buf)
	}
}

func (rc *RootComplex) dmaWrite(v tlp.View) {
	addr, n := pcie.RequestBytes(v)
	p := v.Payload()
	lead := int(addr & 3)
	if lead+n > len(p) {
		return
	}
	if addr >= MSIBase && addr <= MSILimit {
		rc.Stats.MSIs++
		if rc.OnMSI != nil && n >= 2 {
			var d [4]byte
			copy(d[:], p[lead:lead+n])
			rc.OnMSI(binary.LittleEndian.Uint32(d[:]))
		}
		return
	}
	rc.Stats.DMAWrites++
	rc.Stats.DMAWriteBytes += uint64(n)
	rc.Mem.Write(addr, p[lead:lead+n])
	rc.watch.wrote(addr, uint64(n))
}

func (rc *RootComplex) portForBus(bus uint8) *RootPortFn {
	for _, rp := range rc.Ports {
		if rp.BusBehind(bus) {
			return rp
		}
	}
	return nil
}

func (rc *RootComplex) portForAddr(addr uint64) *RootPortFn {
	for _, rp := range rc.Ports {
		if rp.ClaimsAddress(addr) {
			return rp
		}
	}
	return nil
}

func statusErr(v tlp.View) error {
	if v == nil {
		return ErrTimeout
	}
	switch v.Status() {
	case tlp.StatusSC:
		return nil
	case tlp.StatusCA:
		return ErrCA
	}
	return ErrUR
}

// CfgReadAsync reads the config DW at off of function id; cb gets the
// value or an error.
func (rc *RootComplex) CfgReadAsync(id tlp.ID, off uint16, cb func(uint32, error)) {
	rc.Stats.CfgRequests++
	if id.Bus() == 0 {
		d := int(id.Device())
		if id.Function() != 0 || d < 1 || d > len(rc.Ports) {
			rc.s.After(100*time.Nanosecond, func() { cb(0xffffffff, ErrUR) })
			return
		}
		v := rc.Ports[d-1].Cfg.Read32(off)
		rc.s.After(100*time.Nanosecond, func() { cb(v, nil) })
		return
	}
	rp := rc.portForBus(id.Bus())
	if rp == nil {
		rc.s.After(100*time.Nanosecond, func() { cb(0xffffffff, ErrNoRoute) })
		return
	}
	type1 := id.Bus() != rp.Secondary()
	r, err := rc.reserve(func(v tlp.View) {
		if err := statusErr(v); err != nil {
			cb(0xffffffff, err)
			return
		}
		p := v.Payload()
		if len(p) < 4 {
			cb(0xffffffff, fmt.Errorf("host: config read completion without data"))
			return
		}
		cb(binary.LittleEndian.Uint32(p), nil)
	})
	if err != nil {
		cb(0xffffffff, err)
		return
	}
	rc.buf = pcie.AppendCfg(rc.buf[:0], type1, 0, r.tag, id, off, 0xf, nil)
	rp.down.SendTLP(rc.buf)
}

// CfgWriteAsync writes a config DW (byte enables be) and calls cb when the
// write has completed.
func (rc *RootComplex) CfgWriteAsync(id tlp.ID, off uint16, be uint8, val uint32, cb func(error)) {
	rc.Stats.CfgRequests++
	var d [4]byte
	binary.LittleEndian.PutUint32(d[:], val)
	if id.Bus() == 0 {
		dev := int(id.Device())
		if id.Function() != 0 || dev < 1 || dev > len(rc.Ports) {
			rc.s.After(100*time.Nanosecond, func() { cb(ErrUR) })
			return
		}
		rc.Ports[dev-1].Cfg.Write(off, be, d)
		rc.s.After(100*time.Nanosecond, func() { cb(nil) })
		return
	}
	rp := rc.portForBus(id.Bus())
	if rp == nil {
		rc.s.After(100*time.Nanosecond, func() { cb(ErrNoRoute) })
		return
	}
	type1 := id.Bus() != rp.Secondary()
	r, err := rc.reserve(func(v tlp.View) { cb(statusErr(v)) })
	if err != nil {
		cb(err)
		return
	}
	rc.buf = pcie.AppendCfg(rc.buf[:0], type1, 0, r.tag, id, off, be, d[:])
	rp.down.SendTLP(rc.buf)
}

// MMIOReadAsync reads n bytes at a device address. cb gets them, or an
// error; the bytes are valid only during the call (copy them to keep
// them): the request's slot is reused, so a read allocates nothing.
func (rc *RootComplex) MMIOReadAsync(addr uint64, n int, cb func([]byte, error)) {
	rc.Stats.MMIOReads++
	rp := rc.portForAddr(addr)
	if rp == nil {
		rc.s.After(100*time.Nanosecond, func() { cb(nil, ErrNoRoute) })
		return
	}
	r, err := rc.reserve(nil)
	if err != nil {
		cb(nil, err)
		return
	}
	r.cb, r.n, r.data, r.read = r.mmioF, n, r.data[:0], cb
	rc.buf = pcie.AppendMRd(rc.buf[:0], 0, r.tag, addr, n)
	rp.down.SendTLP(rc.buf)
}

// MMIOWrite posts a write to a device address (split at 4 KiB, at most
// 256 bytes per TLP, as CPU write-combining does).
func (rc *RootComplex) MMIOWrite(addr uint64, data []byte) error {
	rp := rc.portForAddr(addr)
	if rp == nil {
		return ErrNoRoute
	}
	for len(data) > 0 {
		k := min(len(data), 256, int(4096-addr%4096))
		rc.Stats.MMIOWrites++
		rc.buf = pcie.AppendMWr(rc.buf[:0], 0, addr, data[:k])
		rp.down.SendTLP(rc.buf)
		addr += uint64(k)
		data = data[k:]
	}
	return nil
}

// MMIOWrite32 posts a 32-bit register write.
func (rc *RootComplex) MMIOWrite32(addr uint64, v uint32) error {
	var d [4]byte
	binary.LittleEndian.PutUint32(d[:], v)
	return rc.MMIOWrite(addr, d[:])
}

// Driver runs the simulation for the host CPU's blocking calls: in virtual
// time by default, or paced to the wall clock (package emu/realtime).
type Driver interface {
	// RunWhile runs events while cond holds; false if it can make no
	// more progress.
	RunWhile(cond func() bool) bool
	// Advance lets d pass.
	Advance(d time.Duration)
}

type virtualDriver struct{ s *sim.Sim }

func (v virtualDriver) RunWhile(cond func() bool) bool {
	v.s.RunWhile(cond, 0)
	return !cond()
}

func (v virtualDriver) Advance(d time.Duration) { pcie.RunUntil(v.s, v.s.Now()+d) }

// SetDriver replaces the virtual-time driver.
func (rc *RootComplex) SetDriver(d Driver) { rc.drv = d }

// RunWhile runs the simulation through the host's driver while cond holds:
// the host CPU is blocked meanwhile. It reports whether cond became false.
func (rc *RootComplex) RunWhile(cond func() bool) bool {
	if rc.drv == nil {
		rc.drv = virtualDriver{rc.s}
	}
	return rc.drv.RunWhile(cond)
}

// wait runs the simulation until c is done; the host CPU is blocked
// meanwhile.
func (rc *RootComplex) wait(c *call) error {
	if !rc.RunWhile(c.waiting) {
		return fmt.Errorf("host: simulation stalled")
	}
	if !c.done {
		return fmt.Errorf("host: simulation ran out of events before the request completed")
	}
	return nil
}

// CfgRead32 is the blocking form of CfgReadAsync, for CPU-side code that
// drives the simulation (enumeration, drivers, workloads).
func (rc *RootComplex) CfgRead32(id tlp.ID, off uint16) (uint32, error) {
	c := rc.calls.get()
	defer rc.calls.put(c)
	rc.CfgReadAsync(id, off, c.gotWord)
	if werr := rc.wait(c); werr != nil {
		return 0xffffffff, fmt.Errorf("config read %v+%#x: %w", id, off, werr)
	}
	if c.err != nil {
		return c.val, fmt.Errorf("config read %v+%#x: %w", id, off, c.err)
	}
	return c.val, nil
}

// CfgWrite32 is the blocking form of CfgWriteAsync.
func (rc *RootComplex) CfgWrite32(id tlp.ID, off uint16, val uint32) error {
	return rc.CfgWrite(id, off, 0xf, val)
}

// CfgWrite writes with byte enables and waits for the completion.
func (rc *RootComplex) CfgWrite(id tlp.ID, off uint16, be uint8, val uint32) error {
	c := rc.calls.get()
	defer rc.calls.put(c)
	rc.CfgWriteAsync(id, off, be, val, c.gotErr)
	if werr := rc.wait(c); werr != nil {
		return fmt.Errorf("config write %v+%#x: %w", id, off, werr)
	}
	if c.err != nil {
		return fmt.Errorf("config write %v+%#x: %w", id, off, c.err)
	}
	return nil
}

// MMIORead32 reads a 32-bit register and waits for it.
func (rc *RootComplex) MMIORead32(addr uint64) (uint32, error) {
	c := rc.calls.get()
	defer rc.calls.put(c)
	rc.MMIOReadAsync(addr, 4, c.gotBytes)
	if werr := rc.wait(c); werr != nil {
		return 0xffffffff, fmt.Errorf("MMIO read %#x: %w", addr, werr)
	}
	if c.err != nil {
		return 0xffffffff, fmt.Errorf("MMIO read %#x: %w", addr, c.err)
	}
	return c.val, nil
}

// Advance lets d of virtual time pass on the host CPU (events run meanwhile).
func (rc *RootComplex) Advance(d time.Duration) {
	if rc.drv == nil {
		rc.drv = virtualDriver{rc.s}
	}
	rc.drv.Advance(d)
}

// DRAMBase is where host allocations start (above 4 GiB, so DMA to them
// uses 64-bit addresses as on real servers).
const DRAMBase = 0x100000000

// Alloc reserves n bytes of host DRAM aligned to align (a power of two) and
// returns its address. Memory is never freed: emulated runs are short.
func (rc *RootComplex) Alloc(n, align uint64) uint64 {
	if rc.brk == 0 {
		rc.brk = DRAMBase
	}
	if align == 0 {
		align = 64
	}
	a := alignUp(rc.brk, align)
	rc.brk = a + n
	return a
}
