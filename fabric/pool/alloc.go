package pool

import (
	"fmt"
	"slices"
	"strings"
)

// Reserve chooses GPUs for req and lends them to a new pending allocation
// named id, with a pair ID and a host port for each. It is all or nothing:
// on error the pool is unchanged.
func (p *Pool) Reserve(id string, req Request) (Allocation, error) {
	if err := validID("allocation id", id); err != nil {
		return Allocation{}, err
	}
	if err := req.Validate(); err != nil {
		return Allocation{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.allocs[id]; ok {
		return Allocation{}, fmt.Errorf("%w: allocation %q", ErrExists, id)
	}
	if req.RequestID != "" {
		for _, a := range p.allocs {
			if a.Request.RequestID == req.RequestID {
				return cloneAlloc(a), fmt.Errorf("%w: request_id %q is allocation %q", ErrDuplicate, req.RequestID, a.ID)
			}
		}
	}
	hs, ok := p.hosts[req.Host]
	if !ok {
		return Allocation{}, fmt.Errorf("%w: host %q", ErrNotFound, req.Host)
	}
	if free := hs.Ports - hs.nUsed; free < req.Count {
		return Allocation{}, fmt.Errorf("%w: host %q has %d of %d virtual ports free, request needs %d", ErrNoHostPorts, hs.ID, free, hs.Ports, req.Count)
	}
	if len(p.pairs)+req.Count > MaxPairID {
		return Allocation{}, fmt.Errorf("%w: %d in use", ErrNoPairIDs, len(p.pairs))
	}
	chosen, err := p.choose(hs, req)
	if err != nil {
		return Allocation{}, err
	}
	a := &Allocation{ID: id, Host: hs.ID, State: StatePending, Request: req, GPUs: make([]Assignment, len(chosen))}
	port := 0
	for i, g := range chosen {
		for hs.used[port] {
			port++
		}
		hs.used[port] = true
		hs.nUsed++
		pair := p.takePairID()
		p.pairs[pair] = id
		g.alloc = id
		g.box.free--
		a.GPUs[i] = Assignment{GPU: g.ID, Box: g.box.ID, Pair: pair, HostPort: port}
	}
	p.allocs[id] = a
	return cloneAlloc(a), nil
}

// takePairID returns the next unused pair ID after the last one handed out,
// so a released ID is reused as late as possible.
func (p *Pool) takePairID() uint32 {
	for {
		id := p.nextPair
		p.nextPair++
		if p.nextPair > MaxPairID {
			p.nextPair = 1
		}
		if _, used := p.pairs[id]; !used {
			return id
		}
	}
}

// Activate marks a pending allocation active.
func (p *Pool) Activate(id string) (Allocation, error) {
	return p.transition(id, StateActive, StatePending)
}

// BeginRelease marks an allocation releasing; its GPUs stay lent until Remove.
func (p *Pool) BeginRelease(id string) (Allocation, error) {
	return p.transition(id, StateReleasing, StatePending, StateActive, StateReleasing)
}

func (p *Pool) transition(id string, to State, from ...State) (Allocation, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.allocs[id]
	if !ok {
		return Allocation{}, fmt.Errorf("%w: allocation %q", ErrNotFound, id)
	}
	if !slices.Contains(from, a.State) {
		return Allocation{}, fmt.Errorf("%w: allocation %q is %s, cannot become %s", ErrConflict, id, a.State, to)
	}
	a.State = to
	return cloneAlloc(a), nil
}

// Remove ends an allocation and frees its GPUs, ports and pair IDs.
func (p *Pool) Remove(id string) (Allocation, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.allocs[id]
	if !ok {
		return Allocation{}, fmt.Errorf("%w: allocation %q", ErrNotFound, id)
	}
	hs := p.hosts[a.Host]
	for _, as := range a.GPUs {
		if g := p.gpus[as.GPU]; g != nil && g.alloc == id {
			g.alloc = ""
			g.box.recount()
		}
		delete(p.pairs, as.Pair)
		if hs != nil && as.HostPort < len(hs.used) && hs.used[as.HostPort] {
			hs.used[as.HostPort] = false
			hs.nUsed--
		}
	}
	delete(p.allocs, id)
	return cloneAlloc(a), nil
}

// Restore puts back an allocation read from the store. It checks that the
// host, GPUs, ports and pair IDs exist and are not taken.
func (p *Pool) Restore(a Allocation) error {
	if err := validID("allocation id", a.ID); err != nil {
		return err
	}
	switch a.State {
	case StatePending, StateActive, StateReleasing:
	default:
		return invalidf("allocation %q: state %q", a.ID, a.State)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.allocs[a.ID]; ok {
		return fmt.Errorf("%w: allocation %q", ErrExists, a.ID)
	}
	hs, ok := p.hosts[a.Host]
	if !ok {
		return fmt.Errorf("%w: allocation %q: host %q", ErrNotFound, a.ID, a.Host)
	}
	ports, pairs, gpus := map[int]bool{}, map[uint32]bool{}, map[string]bool{}
	for i, as := range a.GPUs {
		g, ok := p.gpus[as.GPU]
		switch {
		case !ok:
			return fmt.Errorf("%w: allocation %q gpus[%d]: gpu %q", ErrNotFound, a.ID, i, as.GPU)
		case g.alloc != "" || gpus[as.GPU]:
			return fmt.Errorf("%w: allocation %q gpus[%d]: gpu %q already lent", ErrConflict, a.ID, i, as.GPU)
		case g.box.ID != as.Box:
			return fmt.Errorf("%w: allocation %q gpus[%d]: gpu %q is in box %q, not %q", ErrConflict, a.ID, i, as.GPU, g.box.ID, as.Box)
		case as.Pair == 0 || as.Pair > MaxPairID:
			return invalidf("allocation %q gpus[%d]: pair %d out of range", a.ID, i, as.Pair)
		case p.pairs[as.Pair] != "" || pairs[as.Pair]:
			return fmt.Errorf("%w: allocation %q gpus[%d]: pair %d already used", ErrConflict, a.ID, i, as.Pair)
		case as.HostPort < 0 || as.HostPort >= hs.Ports:
			return invalidf("allocation %q gpus[%d]: host port %d out of range", a.ID, i, as.HostPort)
		case hs.used[as.HostPort] || ports[as.HostPort]:
			return fmt.Errorf("%w: allocation %q gpus[%d]: host port %d already used", ErrConflict, a.ID, i, as.HostPort)
		}
		ports[as.HostPort], pairs[as.Pair], gpus[as.GPU] = true, true, true
	}
	c := cloneAlloc(&a)
	for _, as := range c.GPUs {
		g := p.gpus[as.GPU]
		g.alloc = a.ID
		g.box.recount()
		p.pairs[as.Pair] = a.ID
		hs.used[as.HostPort] = true
		hs.nUsed++
		if as.Pair >= p.nextPair {
			p.nextPair = as.Pair + 1
			if p.nextPair > MaxPairID {
				p.nextPair = 1
			}
		}
	}
	p.allocs[a.ID] = &c
	return nil
}

// Box returns one box.
func (p *Pool) Box(id string) (Box, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	bs, ok := p.boxes[id]
	if !ok {
		return Box{}, fmt.Errorf("%w: box %q", ErrNotFound, id)
	}
	return bs.export(), nil
}

// Boxes lists the boxes sorted by ID.
func (p *Pool) Boxes() []Box {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Box, len(p.boxOrder))
	for i, bs := range p.boxOrder {
		out[i] = bs.export()
	}
	return out
}

// Host returns one host.
func (p *Pool) Host(id string) (Host, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	hs, ok := p.hosts[id]
	if !ok {
		return Host{}, fmt.Errorf("%w: host %q", ErrNotFound, id)
	}
	return hs.export(), nil
}

// Hosts lists the hosts sorted by ID.
func (p *Pool) Hosts() []Host {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Host, 0, len(p.hosts))
	for _, hs := range p.hosts {
		out = append(out, hs.export())
	}
	slices.SortFunc(out, func(a, b Host) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// GPU returns one GPU.
func (p *Pool) GPU(id string) (GPU, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	g, ok := p.gpus[id]
	if !ok {
		return GPU{}, fmt.Errorf("%w: gpu %q", ErrNotFound, id)
	}
	return g.export(), nil
}

// GPUs lists every GPU, by box then position.
func (p *Pool) GPUs() []GPU {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]GPU, 0, len(p.gpus))
	for _, bs := range p.boxOrder {
		for _, g := range bs.gpus {
			out = append(out, g.export())
		}
	}
	return out
}

// Allocation returns one allocation.
func (p *Pool) Allocation(id string) (Allocation, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.allocs[id]
	if !ok {
		return Allocation{}, fmt.Errorf("%w: allocation %q", ErrNotFound, id)
	}
	return cloneAlloc(a), nil
}

// Allocations lists the allocations sorted by ID.
func (p *Pool) Allocations() []Allocation {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Allocation, 0, len(p.allocs))
	for _, a := range p.allocs {
		out = append(out, cloneAlloc(a))
	}
	slices.SortFunc(out, func(a, b Allocation) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Stats counts GPUs by state.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{GPUs: len(p.gpus), Boxes: len(p.boxes), Hosts: len(p.hosts), Allocs: len(p.allocs)}
	for _, bs := range p.boxOrder {
		if bs.Draining {
			s.DrainingBoxes++
		}
		for _, g := range bs.gpus {
			switch {
			case g.alloc != "":
				s.Used++
			case g.Health != Healthy:
				s.Unhealthy++
			case bs.Draining:
				s.Draining++
			default:
				s.Free++
			}
		}
	}
	return s
}

// CheckInvariants verifies the pool's internal consistency: every lent GPU
// is in exactly its allocation, pair IDs and host ports are unique and
// accounted for, and the per-box free counts are right. Tests call it.
func (p *Pool) CheckInvariants() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	lent := map[string]string{}
	portsUsed := map[string]int{}
	npairs := 0
	for id, a := range p.allocs {
		if a.ID != id {
			return fmt.Errorf("allocation key %q holds id %q", id, a.ID)
		}
		hs := p.hosts[a.Host]
		if hs == nil {
			return fmt.Errorf("allocation %q: unknown host %q", id, a.Host)
		}
		seenPort := map[int]bool{}
		for _, as := range a.GPUs {
			if prev, ok := lent[as.GPU]; ok {
				return fmt.Errorf("gpu %q lent to both %q and %q", as.GPU, prev, id)
			}
			lent[as.GPU] = id
			g := p.gpus[as.GPU]
			if g == nil || g.alloc != id {
				return fmt.Errorf("allocation %q lists gpu %q that does not point back", id, as.GPU)
			}
			if p.pairs[as.Pair] != id {
				return fmt.Errorf("allocation %q pair %d maps to %q", id, as.Pair, p.pairs[as.Pair])
			}
			npairs++
			if seenPort[as.HostPort] || !hs.used[as.HostPort] {
				return fmt.Errorf("allocation %q host port %d not uniquely marked used", id, as.HostPort)
			}
			seenPort[as.HostPort] = true
			portsUsed[a.Host]++
		}
	}
	if npairs != len(p.pairs) {
		return fmt.Errorf("%d pair IDs recorded, %d in allocations", len(p.pairs), npairs)
	}
	for id, hs := range p.hosts {
		n := 0
		for _, u := range hs.used {
			if u {
				n++
			}
		}
		if n != hs.nUsed || n != portsUsed[id] {
			return fmt.Errorf("host %q: %d ports marked, count %d, allocations use %d", id, n, hs.nUsed, portsUsed[id])
		}
	}
	for id, g := range p.gpus {
		if g.alloc != "" && lent[id] != g.alloc {
			return fmt.Errorf("gpu %q points at allocation %q that does not list it", id, g.alloc)
		}
	}
	for _, bs := range p.boxOrder {
		free := bs.free
		bs.recount()
		if free != bs.free {
			return fmt.Errorf("box %q free count %d, actual %d", bs.ID, free, bs.free)
		}
	}
	return nil
}
