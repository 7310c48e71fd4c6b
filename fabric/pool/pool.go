package pool

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// Pool is the inventory and the allocations. It is safe for concurrent use;
// every method takes one lock, so each is atomic.
type Pool struct {
	mu       sync.Mutex
	boxes    map[string]*boxState
	boxOrder []*boxState // sorted by ID, for deterministic choices
	gpus     map[string]*gpuState
	hosts    map[string]*hostState
	allocs   map[string]*Allocation
	rtt      map[rttKey]time.Duration
	pairs    map[uint32]string // pair ID -> allocation ID
	nextPair uint32
	scratch  []candidate // reused by choose, under mu

	// EstimateRTT ranks boxes for which no RTT was measured. It must be
	// set before first use; New sets DefaultEstimateRTT.
	EstimateRTT func(host, box Location) time.Duration
}

type rttKey struct{ host, box string }

type gpuState struct {
	GPU
	box   *boxState
	alloc string
}

type boxState struct {
	Box              // GPUs field unused; see gpus
	gpus []*gpuState // sorted by (Switch, Port, ID)
	free int         // healthy and not lent
	// homogeneous: every GPU has the same model and memory (the usual
	// box), so a constrained request is matched per box, not per GPU.
	homogeneous bool
}

type hostState struct {
	Host
	used  []bool // by virtual port
	nUsed int
}

// New returns an empty pool.
func New() *Pool {
	return &Pool{
		boxes:       map[string]*boxState{},
		gpus:        map[string]*gpuState{},
		hosts:       map[string]*hostState{},
		allocs:      map[string]*Allocation{},
		rtt:         map[rttKey]time.Duration{},
		pairs:       map[uint32]string{},
		nextPair:    1,
		EstimateRTT: DefaultEstimateRTT,
	}
}

// DefaultEstimateRTT guesses an RTT from topology when none was measured:
// same rack 4µs, same pod 8µs, otherwise 20µs. Only the order matters: it
// ranks boxes, and a measured RTT always wins.
func DefaultEstimateRTT(host, box Location) time.Duration {
	switch {
	case host.Rack != "" && host.Rack == box.Rack && host.Pod == box.Pod:
		return 4 * time.Microsecond
	case host.Pod != "" && host.Pod == box.Pod:
		return 8 * time.Microsecond
	default:
		return 20 * time.Microsecond
	}
}

func validID(field, id string) error {
	if id == "" {
		return invalidf("%s is required", field)
	}
	if len(id) > 128 {
		return invalidf("%s %.16q... is longer than 128 bytes", field, id)
	}
	for i, r := range id {
		ok := r == '-' || r == '_' || r == '.' || r == ':' ||
			(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
		if !ok {
			return invalidf("%s %q: character %q at offset %d; use letters, digits, '-', '_', '.', ':'", field, id, r, i)
		}
	}
	return nil
}

func validAgentURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return invalidf("agent_url %q: want an http(s) URL such as http://10.0.0.7:7701", s)
	}
	return nil
}

// missingFields names, in one error, the required fields left empty
// when more than one is (a "{}" gets all of them at once); nil otherwise,
// for the single field's own check to say what it wants.
func missingFields(names []string, empty ...bool) error {
	var miss []string
	for i, e := range empty {
		if e {
			miss = append(miss, names[i])
		}
	}
	if len(miss) < 2 {
		return nil
	}
	return invalidf("missing required fields %s", strings.Join(miss, ", "))
}

// Validate reports what is wrong with b as a registration, naming the
// JSON field; AddBox calls it, and so may a client before sending b.
func (b Box) Validate() error {
	if err := missingFields([]string{"id", "bridge.switch_port", "bridge.mac"},
		b.ID == "", b.Bridge.SwitchPort == "", b.Bridge.MAC == ""); err != nil {
		return err
	}
	if err := validID("id", b.ID); err != nil {
		return err
	}
	if err := b.Bridge.Validate("bridge"); err != nil {
		return err
	}
	if err := validAgentURL(b.AgentURL); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, g := range b.GPUs {
		f := fmt.Sprintf("gpus[%d]", i)
		if err := validID(f+".id", g.ID); err != nil {
			return err
		}
		if seen[g.ID] {
			return invalidf("%s.id %q appears twice", f, g.ID)
		}
		seen[g.ID] = true
		if g.Model == "" {
			return invalidf("%s.model is required", f)
		}
		if g.Switch < 0 || g.Port < 0 {
			return invalidf("%s: pcie_switch and pcie_port must not be negative", f)
		}
		if g.Health != "" && g.Health != Healthy && g.Health != Unhealthy {
			return invalidf("%s.health %q: want %q or %q", f, g.Health, Healthy, Unhealthy)
		}
		if g.Box != "" && g.Box != b.ID {
			return invalidf("%s.box %q differs from box id %q", f, g.Box, b.ID)
		}
	}
	return nil
}

// Validate reports what is wrong with h as a registration, naming the
// JSON field; AddHost calls it, and so may a client before sending h.
func (h Host) Validate() error {
	if err := missingFields([]string{"id", "bridge.switch_port", "bridge.mac", "ports"},
		h.ID == "", h.Bridge.SwitchPort == "", h.Bridge.MAC == "", h.Ports == 0); err != nil {
		return err
	}
	if err := validID("id", h.ID); err != nil {
		return err
	}
	if err := h.Bridge.Validate("bridge"); err != nil {
		return err
	}
	if err := validAgentURL(h.AgentURL); err != nil {
		return err
	}
	if h.Ports < MinHostPorts || h.Ports > 1<<16 {
		return invalidf("ports is %d; a host bridge exposes %d to 65536 virtual downstream ports", h.Ports, MinHostPorts)
	}
	return nil
}

// AddBox registers a box or replaces its registration. A GPU that is lent
// must stay in the box with the fields it was lent with (ErrInUse), and a
// box with GPUs lent keeps its bridge endpoint and agent URL (ErrInUse);
// no two bridges share an endpoint (ErrConflict). The draining flag of a
// known box is kept.
func (p *Pool) AddBox(b Box) (Box, error) {
	if err := b.Validate(); err != nil {
		return Box{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.boxes[b.ID]
	inNew := map[string]bool{}
	for _, g := range b.GPUs {
		inNew[g.ID] = true
		if gs, ok := p.gpus[g.ID]; ok && gs.box.ID != b.ID {
			return Box{}, fmt.Errorf("%w: gpu %q belongs to box %q", ErrConflict, g.ID, gs.box.ID)
		}
	}
	if err := p.clashLocked("box", b.ID, b.Bridge); err != nil {
		return Box{}, err
	}
	if old != nil {
		for _, gs := range old.gpus {
			if gs.alloc != "" && !inNew[gs.ID] {
				return Box{}, fmt.Errorf("%w: gpu %q is lent to allocation %q and missing from the new registration", ErrInUse, gs.ID, gs.alloc)
			}
		}
		if lent := old.lentSummary(); lent != "" {
			if err := lentMove(fmt.Sprintf("box %q", b.ID), old.Bridge, b.Bridge, old.AgentURL, b.AgentURL, lent); err != nil {
				return Box{}, err
			}
		}
		b.GPUs = slices.Clone(b.GPUs) // the caller's
		for i := range b.GPUs {
			if prev, ok := p.gpus[b.GPUs[i].ID]; ok && prev.alloc != "" {
				if err := keepLentGPU(b.ID, prev.GPU, &b.GPUs[i], prev.alloc); err != nil {
					return Box{}, err
				}
			}
		}
		b.Draining = old.Draining
	}
	bs := &boxState{Box: b}
	bs.Box.GPUs = nil
	for _, g := range b.GPUs {
		g.Box = b.ID
		g.Allocation = ""
		if g.Health == "" {
			g.Health = Healthy
		}
		gs := &gpuState{GPU: g, box: bs}
		if old != nil {
			if prev, ok := p.gpus[g.ID]; ok {
				gs.alloc = prev.alloc
			}
		}
		bs.gpus = append(bs.gpus, gs)
	}
	slices.SortFunc(bs.gpus, func(x, y *gpuState) int {
		if x.Switch != y.Switch {
			return x.Switch - y.Switch
		}
		if x.Port != y.Port {
			return x.Port - y.Port
		}
		return strings.Compare(x.ID, y.ID)
	})
	if old != nil {
		for _, gs := range old.gpus {
			delete(p.gpus, gs.ID)
		}
	}
	for _, gs := range bs.gpus {
		p.gpus[gs.ID] = gs
	}
	bs.recount()
	bs.homogeneous = true
	for _, g := range bs.gpus {
		if g.Model != bs.gpus[0].Model || g.MemoryMiB != bs.gpus[0].MemoryMiB {
			bs.homogeneous = false
		}
	}
	p.boxes[b.ID] = bs
	if old != nil {
		i := slices.Index(p.boxOrder, old)
		p.boxOrder[i] = bs
	} else {
		i, _ := slices.BinarySearchFunc(p.boxOrder, b.ID, func(x *boxState, id string) int { return strings.Compare(x.ID, id) })
		p.boxOrder = slices.Insert(p.boxOrder, i, bs)
	}
	return bs.export(), nil
}

func (bs *boxState) recount() {
	bs.free = 0
	for _, g := range bs.gpus {
		if g.alloc == "" && g.Health == Healthy {
			bs.free++
		}
	}
}

func (bs *boxState) export() Box {
	b := bs.Box
	b.GPUs = make([]GPU, len(bs.gpus))
	for i, g := range bs.gpus {
		b.GPUs[i] = g.export()
	}
	return b
}

func (g *gpuState) export() GPU {
	out := g.GPU
	out.Allocation = g.alloc
	return out
}

// RemoveBox forgets a box; it fails with ErrInUse while any GPU is lent.
func (p *Pool) RemoveBox(id string) (Box, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	bs, ok := p.boxes[id]
	if !ok {
		return Box{}, fmt.Errorf("%w: box %q", ErrNotFound, id)
	}
	for _, g := range bs.gpus {
		if g.alloc != "" {
			return Box{}, fmt.Errorf("%w: gpu %q of box %q is lent to allocation %q", ErrInUse, g.ID, id, g.alloc)
		}
	}
	out := bs.export()
	for _, g := range bs.gpus {
		delete(p.gpus, g.ID)
	}
	delete(p.boxes, id)
	p.boxOrder = slices.DeleteFunc(p.boxOrder, func(x *boxState) bool { return x == bs })
	for k := range p.rtt {
		if k.box == id {
			delete(p.rtt, k)
		}
	}
	return out, nil
}

// AddHost registers a host or replaces its registration; the port count may
// not shrink below a port in use, a host holding GPUs keeps its bridge
// endpoint and agent URL (ErrInUse), and no two bridges share an endpoint
// (ErrConflict).
func (p *Pool) AddHost(h Host) (Host, error) {
	if err := h.Validate(); err != nil {
		return Host{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.clashLocked("host", h.ID, h.Bridge); err != nil {
		return Host{}, err
	}
	hs := &hostState{Host: h, used: make([]bool, h.Ports)}
	if old, ok := p.hosts[h.ID]; ok {
		if lent := p.hostLentLocked(h.ID); lent != "" {
			if err := lentMove(fmt.Sprintf("host %q", h.ID), old.Bridge, h.Bridge, old.AgentURL, h.AgentURL, lent); err != nil {
				return Host{}, err
			}
		}
		for port, u := range old.used {
			if !u {
				continue
			}
			if port >= h.Ports {
				return Host{}, fmt.Errorf("%w: host %q port %d is in use; ports cannot shrink to %d", ErrInUse, h.ID, port, h.Ports)
			}
			hs.used[port] = true
		}
		hs.nUsed = old.nUsed
	}
	p.hosts[h.ID] = hs
	return hs.export(), nil
}

func (hs *hostState) export() Host {
	h := hs.Host
	h.UsedPorts = hs.nUsed
	return h
}

// RemoveHost forgets a host; it fails with ErrInUse while it holds GPUs.
func (p *Pool) RemoveHost(id string) (Host, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	hs, ok := p.hosts[id]
	if !ok {
		return Host{}, fmt.Errorf("%w: host %q", ErrNotFound, id)
	}
	for _, a := range p.allocs {
		if a.Host == id {
			return Host{}, fmt.Errorf("%w: host %q holds allocation %q", ErrInUse, id, a.ID)
		}
	}
	delete(p.hosts, id)
	for k := range p.rtt {
		if k.host == id {
			delete(p.rtt, k)
		}
	}
	return hs.export(), nil
}

// SetRTT records a measured round-trip time between a host and a box.
func (p *Pool) SetRTT(r RTT) error {
	if r.RTT <= 0 {
		return invalidf("rtt must be positive, got %v", r.RTT)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.hosts[r.Host]; !ok {
		return fmt.Errorf("%w: host %q", ErrNotFound, r.Host)
	}
	if _, ok := p.boxes[r.Box]; !ok {
		return fmt.Errorf("%w: box %q", ErrNotFound, r.Box)
	}
	p.rtt[rttKey{r.Host, r.Box}] = time.Duration(r.RTT)
	return nil
}

// RTTs lists the measured RTTs, sorted by host then box.
func (p *Pool) RTTs() []RTT {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]RTT, 0, len(p.rtt))
	for k, v := range p.rtt {
		out = append(out, RTT{Host: k.host, Box: k.box, RTT: Duration(v)})
	}
	slices.SortFunc(out, func(a, b RTT) int {
		if c := strings.Compare(a.Host, b.Host); c != 0 {
			return c
		}
		return strings.Compare(a.Box, b.Box)
	})
	return out
}

func (p *Pool) rttLocked(hs *hostState, bs *boxState) time.Duration {
	if d, ok := p.rtt[rttKey{hs.ID, bs.ID}]; ok {
		return d
	}
	return p.EstimateRTT(hs.Location, bs.Location)
}

// SetDraining turns draining of a box on or off and lists the allocations
// that still hold GPUs in it.
func (p *Pool) SetDraining(box string, on bool) (Box, []string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	bs, ok := p.boxes[box]
	if !ok {
		return Box{}, nil, fmt.Errorf("%w: box %q", ErrNotFound, box)
	}
	bs.Draining = on
	var ids []string
	for _, g := range bs.gpus {
		if g.alloc != "" && !slices.Contains(ids, g.alloc) {
			ids = append(ids, g.alloc)
		}
	}
	slices.Sort(ids)
	return bs.export(), ids, nil
}

// HealthChange is what SetHealth did.
type HealthChange struct {
	GPU GPU `json:"gpu"`
	Box Box `json:"box"`
	// Alloc is the allocation the GPU was taken out of (nil if it was not
	// lent), after the change; Lost is the assignment removed from it.
	Alloc *Allocation `json:"allocation,omitempty"`
	Lost  *Assignment `json:"lost,omitempty"`
}

// SetHealth marks a GPU healthy or unhealthy. An unhealthy GPU that was lent
// leaves its allocation (recorded in Lost) and its pair ID and host port are
// freed; no other GPU is touched.
func (p *Pool) SetHealth(gpu string, h Health) (HealthChange, error) {
	if h != Healthy && h != Unhealthy {
		return HealthChange{}, invalidf("health %q: want %q or %q", h, Healthy, Unhealthy)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	gs, ok := p.gpus[gpu]
	if !ok {
		return HealthChange{}, fmt.Errorf("%w: gpu %q", ErrNotFound, gpu)
	}
	gs.Health = h
	var ch HealthChange
	if h == Unhealthy && gs.alloc != "" {
		a := p.allocs[gs.alloc]
		i := slices.IndexFunc(a.GPUs, func(x Assignment) bool { return x.GPU == gpu })
		lost := a.GPUs[i]
		a.GPUs = slices.Delete(slices.Clone(a.GPUs), i, i+1)
		a.Lost = append(slices.Clone(a.Lost), gpu)
		delete(p.pairs, lost.Pair)
		hs := p.hosts[a.Host]
		hs.used[lost.HostPort] = false
		hs.nUsed--
		gs.alloc = ""
		c := cloneAlloc(a)
		ch.Alloc, ch.Lost = &c, &lost
	}
	gs.box.recount()
	ch.GPU, ch.Box = gs.export(), gs.box.export()
	return ch, nil
}

func cloneAlloc(a *Allocation) Allocation {
	c := *a
	c.GPUs = slices.Clone(a.GPUs)
	c.Lost = slices.Clone(a.Lost)
	return c
}
