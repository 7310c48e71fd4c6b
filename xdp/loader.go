package xdp

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
)

// MaxMaxPairs is the largest MaxPairs: rule slots (2 x MaxPairs) must fit
// the 16-bit index entries.
const MaxMaxPairs = 32767

// MaxPorts is the number of ports the program can manage (port counter
// slots 1..MaxPorts-1; slot 0 counts frames on unmanaged interfaces).
const MaxPorts = 256

// DefaultMaxPairs sizes the pair table and its counters.
const DefaultMaxPairs = 4096

// Options configure Load.
type Options struct {
	// MaxPairs is the number of pairs the maps hold (0: DefaultMaxPairs).
	MaxPairs uint32
	// UDPPort is the UDP destination port of dxpu frames (0: 8855).
	UDPPort uint16
	// AllToXSK sends every dxpu frame to the port's AF_XDP socket (see
	// SetXSK) instead of forwarding it: the AF_XDP userspace switch.
	AllToXSK bool
}

// Sentinel errors.
var (
	ErrFull     = errors.New("xdp: map full")
	ErrAttached = errors.New("xdp: already attached")
)

type installedPair struct {
	rule    switching.Rule
	slot    uint32 // rule slot (index entry = slot+1)
	ctrSlot uint32 // counter slot, stable for the pair's lifetime
	// base is the pair's counters when its rule last changed ports: what
	// came before is already in Switch.retired.
	base switching.Counters
}

type installedPort struct {
	port switching.Port
	slot uint32
}

// Switch is the loaded XDP fast path: its programs, maps, links and the
// table state installed in the maps. Methods are safe for concurrent use.
type Switch struct {
	opts  Options
	objs  xdpSwitchObjects
	ncpu  int
	mu    sync.Mutex
	links map[int]link.Link // by ifindex

	pairs     map[uint32]*installedPair
	index     []byte // pair_index, mmapped
	ruleSlots slotPool
	ctrSlots  slotPool
	ports     map[uint32]*installedPort // by ifindex
	portSlots slotPool
	// retired holds forwarding counts of removed (or re-ported) pairs,
	// by port name: the program counts forwarded frames on the pair only.
	retired map[string]*switching.Counters
	version uint64
}

// Load loads the program and creates its maps (no interface attached).
func Load(opts Options) (*Switch, error) {
	if opts.MaxPairs == 0 {
		opts.MaxPairs = DefaultMaxPairs
	}
	if opts.UDPPort == 0 {
		opts.UDPPort = switching.DefaultUDPPort
	}
	spec, err := loadXdpSwitch()
	if err != nil {
		return nil, err
	}
	if opts.MaxPairs > MaxMaxPairs {
		return nil, fmt.Errorf("xdp: MaxPairs %d above %d", opts.MaxPairs, MaxMaxPairs)
	}
	slots := 2 * opts.MaxPairs // room for the generation scheme
	spec.Maps[xdpSwitchMapRules].MaxEntries = slots
	spec.Maps[xdpSwitchMapPairStats].MaxEntries = slots
	if err := spec.Variables[xdpSwitchVarDxpuUdpPort].Set(hostToNet16(opts.UDPPort)); err != nil {
		return nil, fmt.Errorf("xdp: setting the UDP port: %w", err)
	}
	if opts.AllToXSK {
		if err := spec.Variables[xdpSwitchVarAllToXsk].Set(uint8(1)); err != nil {
			return nil, fmt.Errorf("xdp: setting all_to_xsk: %w", err)
		}
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("xdp: counting CPUs: %w", err)
	}
	s := &Switch{
		opts:      opts,
		ncpu:      ncpu,
		links:     map[int]link.Link{},
		pairs:     map[uint32]*installedPair{},
		ruleSlots: newSlotPool(0, slots),
		ctrSlots:  newSlotPool(0, slots),
		ports:     map[uint32]*installedPort{},
		portSlots: newSlotPool(1, MaxPorts),
		retired:   map[string]*switching.Counters{},
	}
	if err := spec.LoadAndAssign(&s.objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("xdp: loading the switch program: %+v", ve)
		}
		return nil, fmt.Errorf("xdp: loading the switch program: %w", err)
	}
	if s.index, err = mmapMap(s.objs.PairIndex); err != nil {
		s.objs.Close()
		return nil, err
	}
	return s, nil
}

// Close detaches from every interface and releases programs and maps.
func (s *Switch) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for idx, l := range s.links {
		errs = append(errs, l.Close())
		delete(s.links, idx)
	}
	if s.index != nil {
		errs = append(errs, unix.Munmap(s.index))
		s.index = nil
	}
	errs = append(errs, s.objs.Close())
	return errors.Join(errs...)
}

// AttachMode is how a program is attached to an interface.
type AttachMode string

const (
	ModeDriver  AttachMode = "driver"
	ModeGeneric AttachMode = "generic"
)

// Attach runs the switch program on the interface: in driver (native) mode
// when the driver supports it, otherwise in generic mode.
func (s *Switch) Attach(ifindex int) (AttachMode, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.links[ifindex]; ok {
		return "", fmt.Errorf("%w: ifindex %d", ErrAttached, ifindex)
	}
	l, mode, err := attach(s.objs.DxpuSwitch, ifindex)
	if err != nil {
		return "", err
	}
	s.links[ifindex] = l
	return mode, nil
}

func attach(prog *ebpf.Program, ifindex int) (link.Link, AttachMode, error) {
	l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex, Flags: link.XDPDriverMode})
	if err == nil {
		return l, ModeDriver, nil
	}
	if errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EEXIST) {
		// Another program holds the interface: generic mode would run
		// beside it, not instead of it.
		return nil, "", fmt.Errorf("xdp: attaching to ifindex %d: %w", ifindex, err)
	}
	l, err2 := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex, Flags: link.XDPGenericMode})
	if err2 != nil {
		return nil, "", fmt.Errorf("xdp: attaching to ifindex %d: driver mode: %v; generic mode: %w", ifindex, err, err2)
	}
	return l, ModeGeneric, nil
}

// Detach removes the program from the interface.
func (s *Switch) Detach(ifindex int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.links[ifindex]
	if !ok {
		return fmt.Errorf("xdp: not attached to ifindex %d", ifindex)
	}
	delete(s.links, ifindex)
	return l.Close()
}

// AttachPass loads an XDP program that passes every frame: a veth drops
// frames redirected into it unless its peer runs one. It loads the program and attaches it to ifindex (driver mode
// if possible). Close the returned link to detach.
func AttachPass(ifindex int) (link.Link, AttachMode, error) {
	spec, err := loadXdpSwitch()
	if err != nil {
		return nil, "", err
	}
	// Only the pass program: it uses no maps, so none are created.
	var objs struct {
		Pass *ebpf.Program `ebpf:"dxpu_pass"`
	}
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return nil, "", fmt.Errorf("xdp: loading the pass program: %w", err)
	}
	defer objs.Pass.Close() // the link keeps the program alive
	return attach(objs.Pass, ifindex)
}

// XSKQueues is the number of RX queues per port that can have an AF_XDP
// socket (XSK_QUEUES).
const XSKQueues = 64

// SetXSK makes frames for the slow path (all dxpu frames with AllToXSK)
// that arrive on RX queue `queue` of the port with ifindex go to the AF_XDP
// socket fd; fd < 0 removes it (they go to the stack). The port must be
// installed by Reconcile first.
func (s *Switch) SetXSK(ifindex int, queue uint32, fd int) error {
	s.mu.Lock()
	p := s.ports[uint32(ifindex)]
	s.mu.Unlock()
	if p == nil || queue >= XSKQueues {
		return fmt.Errorf("xdp: no AF_XDP slot for ifindex %d queue %d (port not reconciled, or queue >= %d)", ifindex, queue, XSKQueues)
	}
	key := p.slot*XSKQueues + queue
	if fd < 0 {
		if err := s.objs.Xsks.Delete(key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("xdp: removing the AF_XDP socket of ifindex %d queue %d: %w", ifindex, queue, err)
		}
		return nil
	}
	if err := s.objs.Xsks.Put(key, uint32(fd)); err != nil {
		return fmt.Errorf("xdp: adding the AF_XDP socket of ifindex %d queue %d: %w", ifindex, queue, err)
	}
	return nil
}

// Version returns the version of the last table reconciled.
func (s *Switch) Version() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// Reconcile makes the maps equal to the table over the given ports (every
// port the switch manages, by name). The order guarantees that no frame is
// forwarded by a rule the table no longer has: removed pairs are deleted
// first; ports are added before the pairs that use them and removed after;
// a changed pair is replaced by one atomic map update. Pairs behind
// unknown ports are skipped and reported in skipped.
func (s *Switch) Reconcile(t *table.Table, ports map[string]switching.Port) (skipped []error, err error) {
	rules, skipped, err := switching.Compile(t, ports, s.opts.UDPPort)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	want := make(map[uint32]switching.Rule, len(rules))
	for _, r := range rules {
		want[r.ID] = r
	}
	// 1. Removed pairs stop forwarding before anything else changes.
	for id, ip := range s.pairs {
		if _, ok := want[id]; ok {
			continue
		}
		s.setIndex(id, 0)
		if c, err := s.readPairCounters(ip.ctrSlot); err == nil {
			s.retire(ip, c)
		}
		s.ruleSlots.retire(ip.slot)
		s.ctrSlots.retire(ip.ctrSlot)
		delete(s.pairs, id)
	}
	// 2. New ports (a port whose ifindex changed counts as new).
	wantPorts := map[uint32]switching.Port{}
	for name, p := range ports {
		p.Name = name
		if p.Index == 0 || len(p.MAC) != 6 {
			return skipped, fmt.Errorf("xdp: port %q needs an ifindex and a 6-byte MAC", name)
		}
		wantPorts[p.Index] = p
	}
	for idx, p := range wantPorts {
		if cur, ok := s.ports[idx]; ok {
			cur.port = p
			continue
		}
		slot, err := s.portSlots.get()
		if err != nil {
			return skipped, fmt.Errorf("%w: more than %d ports", ErrFull, MaxPorts-1)
		}
		if err := s.zeroCounters(s.objs.PortStats, slot); err != nil {
			return skipped, err
		}
		if err := s.objs.PortSlots.Put(idx, slot); err != nil {
			return skipped, fmt.Errorf("xdp: port %q: %w", p.Name, err)
		}
		if err := s.objs.TxPorts.Put(idx, idx); err != nil {
			s.objs.PortSlots.Delete(idx)
			return skipped, fmt.Errorf("xdp: port %q (ifindex %d) into the devmap: %w", p.Name, idx, err)
		}
		s.ports[idx] = &installedPort{port: p, slot: slot}
	}
	// 3. New and changed pairs: the rule goes into a fresh slot, then one
	// atomic index store publishes it.
	var errs []error
	for _, r := range rules {
		cur, ok := s.pairs[r.ID]
		if ok && cur.rule == r {
			continue
		}
		slot, err := s.ruleSlots.get()
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: pair %d: more than %d pairs", ErrFull, r.ID, s.opts.MaxPairs))
			continue
		}
		ctr := uint32(0)
		var base switching.Counters
		if ok {
			ctr, base = cur.ctrSlot, cur.base
		} else {
			if ctr, err = s.ctrSlots.get(); err != nil {
				s.ruleSlots.put(slot)
				errs = append(errs, fmt.Errorf("%w: pair %d: more than %d pairs", ErrFull, r.ID, s.opts.MaxPairs))
				continue
			}
			if err := s.zeroCounters(s.objs.PairStats, ctr); err != nil {
				s.ruleSlots.put(slot)
				s.ctrSlots.put(ctr)
				errs = append(errs, err)
				continue
			}
		}
		val := s.encode(r, ctr)
		if err := s.objs.Rules.Put(slot, &val); err != nil {
			s.ruleSlots.put(slot)
			if !ok {
				s.ctrSlots.put(ctr)
			}
			errs = append(errs, fmt.Errorf("xdp: installing pair %d: %w", r.ID, err))
			continue
		}
		s.setIndex(r.ID, uint16(slot+1))
		if ok {
			s.ruleSlots.retire(cur.slot)
			if portsOf(cur.rule) != portsOf(r) {
				if c, err := s.readPairCounters(ctr); err == nil {
					s.retire(cur, c)
					base = c
				}
			}
		}
		s.pairs[r.ID] = &installedPair{rule: r, slot: slot, ctrSlot: ctr, base: base}
	}
	// 4. Ports no longer wanted go last: no installed pair uses them.
	for idx, p := range s.ports {
		if _, ok := wantPorts[idx]; ok {
			continue
		}
		if err := s.objs.TxPorts.Delete(idx); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, fmt.Errorf("xdp: removing port %q from the devmap: %w", p.port.Name, err))
		}
		if err := s.objs.PortSlots.Delete(idx); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, fmt.Errorf("xdp: removing port %q: %w", p.port.Name, err))
		}
		s.portSlots.retire(p.slot)
		delete(s.ports, idx)
	}
	if len(errs) == 0 {
		s.version = t.Version
	}
	for _, e := range skipped {
		slog.Debug("xdp: pair skipped", "err", e)
	}
	return skipped, errors.Join(errs...)
}

func (s *Switch) encode(r switching.Rule, slot uint32) xdpSwitchPair {
	v := xdpSwitchPair{Slot: slot, Vlan: r.VLAN, DropPpm: r.DropPPM}
	for i, d := range r.Dir {
		v.Dir[i] = xdpSwitchDirection{
			InIfindex:  d.InPort,
			OutIfindex: d.OutPort,
			SrcMac:     d.SrcMAC,
			DstMac:     d.DstMAC,
			PortMac:    d.PortMAC,
			DstPort:    hostToNet16(d.DstUDPPort),
			SrcIp:      wire32(d.SrcIP),
			NewSrcIp:   wire32(d.NewSrcIP),
			NewDstIp:   wire32(d.NewDstIP),
		}
		if p := s.ports[d.InPort]; p != nil {
			v.Dir[i].InSlot = p.slot
		}
		if v.Dir[i].NewSrcIp != 0 && v.Dir[i].NewDstIp != 0 {
			v.Dir[i].CsumAdd = words(v.Dir[i].NewSrcIp) + words(v.Dir[i].NewDstIp)
		}
	}
	return v
}

// hostToNet16 returns the value whose in-memory (native, little-endian)
// bytes are v in network order, as the program compares them.
func hostToNet16(v uint16) uint16 { return v>>8 | v<<8 }

// words is the sum of the two 16-bit halves (words() in switch.c).
func words(v uint32) uint32 { return v&0xffff + v>>16 }

// wire32 returns the uint32 whose in-memory bytes are b.
func wire32(b [4]byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func (s *Switch) zeroCounters(m *ebpf.Map, slot uint32) error {
	if err := m.Put(slot, make([]xdpSwitchCounters, s.ncpu)); err != nil {
		return fmt.Errorf("xdp: clearing counters slot %d: %w", slot, err)
	}
	return nil
}

func (s *Switch) readCounters(m *ebpf.Map, slot uint32) (switching.Counters, error) {
	var per []xdpSwitchCounters
	var sum switching.Counters
	if err := m.Lookup(slot, &per); err != nil {
		return sum, fmt.Errorf("xdp: reading counters slot %d: %w", slot, err)
	}
	for _, c := range per {
		for i := range sum.Packets {
			sum.Packets[i] += c.Packets[i]
			sum.Bytes[i] += c.Bytes[i]
		}
	}
	return sum, nil
}

// readPairCounters reads a pair's counters, summed over CPUs. The program
// counts a forwarded frame once, as received; the same frame is transmitted,
// its bytes changed only by a pushed or popped VLAN tag, which the program
// adds to Bytes of the tx reason as a signed delta (see switch.c).
func (s *Switch) readPairCounters(slot uint32) (switching.Counters, error) {
	c, err := s.readCounters(s.objs.PairStats, slot)
	if err != nil {
		return c, err
	}
	return withTransmitted(c), nil
}

// withTransmitted turns the program's per-pair counts into the Go path's:
// Packets[tx] = Packets[rx], Bytes[tx] = Bytes[rx] + the tag delta.
func withTransmitted(c switching.Counters) switching.Counters {
	for _, rx := range [2]switching.Reason{switching.ReasonToGPU, switching.ReasonToHost} {
		tx := rx + switching.ReasonTxToGPU
		c.Packets[tx] += c.Packets[rx]
		c.Bytes[tx] += c.Bytes[rx]
	}
	return c
}

// PairCounters implements switching.CounterSource: sums over CPUs.
func (s *Switch) PairCounters(fn func(id uint32, c switching.Counters)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, p := range s.pairs {
		c, err := s.readPairCounters(p.ctrSlot)
		if err != nil {
			return err
		}
		fn(id, c)
	}
	return nil
}

// PortCounters implements switching.CounterSource; "" is the slot of
// frames on interfaces the switch does not manage. Forwarded frames are
// counted by the program on their pair only; they are attributed here to
// the pair's ingress (to_gpu, to_host) and egress (tx_*) ports.
func (s *Switch) PortCounters(fn func(port string, c switching.Counters)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	byIndex := map[uint32]*switching.Counters{}
	out := map[string]*switching.Counters{}
	c0, err := s.readCounters(s.objs.PortStats, 0)
	if err != nil {
		return err
	}
	out[""] = &c0
	for idx, p := range s.ports {
		c, err := s.readCounters(s.objs.PortStats, p.slot)
		if err != nil {
			return err
		}
		if r := s.retired[p.port.Name]; r != nil {
			c.Merge(r)
		}
		byIndex[idx] = &c
		out[p.port.Name] = &c
	}
	for _, p := range s.pairs {
		c, err := s.readPairCounters(p.ctrSlot)
		if err != nil {
			return err
		}
		attribute(p.rule, sub(c, p.base), func(ifindex uint32) *switching.Counters {
			if pc := byIndex[ifindex]; pc != nil {
				return pc
			}
			return &c0
		})
	}
	for name, c := range out {
		fn(name, *c)
	}
	return nil
}

// attribute adds a pair's forwarding counts to its ports.
func attribute(r switching.Rule, c switching.Counters, port func(ifindex uint32) *switching.Counters) {
	for dir, rx := range [2]switching.Reason{switching.ReasonToGPU, switching.ReasonToHost} {
		tx := rx + switching.ReasonTxToGPU
		in, out := port(r.Dir[dir].InPort), port(r.Dir[dir].OutPort)
		in.Packets[rx] += c.Packets[rx]
		in.Bytes[rx] += c.Bytes[rx]
		out.Packets[tx] += c.Packets[tx]
		out.Bytes[tx] += c.Bytes[tx]
	}
}

// retire moves a pair's forwarding counts since base onto the ports it used.
func (s *Switch) retire(p *installedPair, c switching.Counters) {
	attribute(p.rule, sub(c, p.base), func(ifindex uint32) *switching.Counters {
		name := ""
		if port := s.ports[ifindex]; port != nil {
			name = port.port.Name
		}
		r := s.retired[name]
		if r == nil {
			r = &switching.Counters{}
			s.retired[name] = r
		}
		return r
	})
}

func sub(a, b switching.Counters) switching.Counters {
	for i := range a.Packets {
		a.Packets[i] -= b.Packets[i]
		a.Bytes[i] -= b.Bytes[i]
	}
	return a
}

func portsOf(r switching.Rule) [4]uint32 {
	return [4]uint32{r.Dir[0].InPort, r.Dir[0].OutPort, r.Dir[1].InPort, r.Dir[1].OutPort}
}
