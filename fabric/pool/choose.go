package pool

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// candidate is a box with free GPUs that match a request.
type candidate struct {
	box  *boxState
	ord  int // position in boxOrder: ties break by box ID
	rtt  time.Duration
	n    int // matching free GPUs
	take int // how many the plan takes
}

func (r Request) constrained() bool { return r.Model != "" || r.MinMemoryMiB > 0 }

func (r Request) matches(g *gpuState) bool {
	return g.alloc == "" && g.Health == Healthy &&
		(r.Model == "" || strings.EqualFold(r.Model, g.Model)) &&
		g.MemoryMiB >= r.MinMemoryMiB
}

func (c *candidate) matching(r Request) []*gpuState {
	out := make([]*gpuState, 0, c.n)
	for _, g := range c.box.gpus {
		if r.matches(g) {
			out = append(out, g)
		}
	}
	return out
}

func byRTT(a, b candidate) int {
	if c := cmp.Compare(a.rtt, b.rtt); c != 0 {
		return c
	}
	return a.ord - b.ord
}

// choose picks req.Count GPUs for host hs, or explains why it cannot. It
// runs under p.mu and reuses p.scratch, so it allocates little.
func (p *Pool) choose(hs *hostState, req Request) ([]*gpuState, error) {
	cands := p.scratch[:0]
	total := 0
	for ord, bs := range p.boxOrder {
		if bs.Draining || bs.free == 0 {
			continue
		}
		rtt := p.rttLocked(hs, bs)
		if req.MaxRTT > 0 && rtt > time.Duration(req.MaxRTT) {
			continue
		}
		c := candidate{box: bs, ord: ord, rtt: rtt, n: bs.free}
		if req.constrained() {
			c.n = 0
			if bs.homogeneous {
				g := bs.gpus[0]
				if (req.Model == "" || strings.EqualFold(req.Model, g.Model)) && g.MemoryMiB >= req.MinMemoryMiB {
					c.n = bs.free
				}
			} else {
				for _, g := range bs.gpus {
					if req.matches(g) {
						c.n++
					}
				}
			}
			if c.n == 0 {
				continue
			}
		}
		cands = append(cands, c)
		total += c.n
	}
	p.scratch = cands[:0]
	if total < req.Count {
		return nil, fmt.Errorf("%w: host %q asked for %d%s, %d free and eligible", ErrInsufficient, req.Host, req.Count, req.describe(), total)
	}
	var plan []*candidate
	switch {
	case req.SameBox:
		var best *candidate
		for i := range cands {
			c := &cands[i]
			if c.n < req.Count {
				continue
			}
			if best == nil || c.rtt < best.rtt || (c.rtt == best.rtt && c.n < best.n) {
				best = c
			}
		}
		if best == nil {
			return nil, fmt.Errorf("%w: host %q asked for %d%s in one box; no box has that many free and eligible", ErrInsufficient, req.Host, req.Count, req.describe())
		}
		best.take = req.Count
		plan = []*candidate{best}
	case req.Spread:
		near := within(cands, req.Count, func(*candidate) int { return 1 })
		capacity := 0
		for _, c := range near {
			capacity += c.n
		}
		if capacity < req.Count {
			near = within(cands, req.Count, func(c *candidate) int { return c.n })
		}
		slices.SortFunc(near, byRTT)
		plan = spreadPlan(near, req.Count)
	default:
		plan = packPlan(within(cands, req.Count, func(c *candidate) int { return c.n }), req.Count)
	}
	out := make([]*gpuState, 0, req.Count)
	for _, c := range plan {
		free := c.box.gpus
		if req.constrained() || c.n != len(free) {
			free = c.matching(req)
		}
		out = append(out, pickInBox(free, c.take)...)
	}
	return out, nil
}

// within keeps, in place and in box order, the candidates inside the
// smallest RTT at which the sum of count over them reaches want (all of
// them if it never does).
func within(cands []candidate, want int, count func(c *candidate) int) []candidate {
	type level struct {
		rtt time.Duration
		sum int
	}
	var levels [16]level
	n := 0
	for i := range cands {
		c := &cands[i]
		j := 0
		for j < n && levels[j].rtt != c.rtt {
			j++
		}
		if j == n {
			if n == len(levels) {
				return withinSorted(cands, want, count)
			}
			levels[n] = level{rtt: c.rtt}
			n++
		}
		levels[j].sum += count(c)
	}
	ls := levels[:n]
	slices.SortFunc(ls, func(a, b level) int { return cmp.Compare(a.rtt, b.rtt) })
	sum := 0
	radius := ls[n-1].rtt
	for _, l := range ls {
		sum += l.sum
		if sum >= want {
			radius = l.rtt
			break
		}
	}
	out := cands[:0]
	for _, c := range cands {
		if c.rtt <= radius {
			out = append(out, c)
		}
	}
	return out
}

// withinSorted is within for candidates with many distinct RTTs.
func withinSorted(cands []candidate, want int, count func(c *candidate) int) []candidate {
	slices.SortFunc(cands, byRTT)
	sum := 0
	for i := 0; i < len(cands); {
		j := i
		for j < len(cands) && cands[j].rtt == cands[i].rtt {
			sum += count(&cands[j])
			j++
		}
		if sum >= want {
			return cands[:j]
		}
		i = j
	}
	return cands
}

// packPlan keeps RTT lowest, then touches as few boxes as possible: a
// single best-fit box when one fits, else the largest boxes first and the
// best fit for the remainder.
func packPlan(near []candidate, count int) []*candidate {
	rest := make([]*candidate, len(near))
	for i := range near {
		rest[i] = &near[i]
	}
	var plan []*candidate
	for need := count; need > 0; {
		var fit *candidate
		for _, c := range rest {
			if c.n >= need && (fit == nil || c.n < fit.n || (c.n == fit.n && c.rtt < fit.rtt)) {
				fit = c
			}
		}
		if fit != nil {
			fit.take = need
			return append(plan, fit)
		}
		big := 0
		for i, c := range rest {
			if c.n > rest[big].n || (c.n == rest[big].n && c.rtt < rest[big].rtt) {
				big = i
			}
		}
		c := rest[big]
		c.take = c.n
		need -= c.n
		plan = append(plan, c)
		rest = slices.Delete(rest, big, big+1)
	}
	return plan
}

// spreadPlan takes one GPU per box in turn, nearest boxes first.
func spreadPlan(near []candidate, count int) []*candidate {
	var plan []*candidate
	for need := count; need > 0; {
		for i := range near {
			c := &near[i]
			if need == 0 || c.take == c.n {
				continue
			}
			if c.take == 0 {
				plan = append(plan, c)
			}
			c.take++
			need--
		}
	}
	return plan
}

func (r Request) describe() string {
	s := ""
	if r.Model != "" {
		s += fmt.Sprintf(" of model %q", r.Model)
	}
	if r.MinMemoryMiB > 0 {
		s += fmt.Sprintf(" with at least %d MiB", r.MinMemoryMiB)
	}
	if r.MaxRTT > 0 {
		s += fmt.Sprintf(" within %v RTT", r.MaxRTT)
	}
	return s
}

// pickInBox takes k of a box's free GPUs (sorted by PCIe switch and port),
// keeping them under as few PCIe switches as possible, best fit first.
func pickInBox(free []*gpuState, k int) []*gpuState {
	if k == len(free) {
		return free
	}
	type group struct{ gpus []*gpuState }
	var groups []group
	for i := 0; i < len(free); {
		j := i
		for j < len(free) && free[j].Switch == free[i].Switch {
			j++
		}
		groups = append(groups, group{free[i:j]})
		i = j
	}
	out := make([]*gpuState, 0, k)
	for need := k; need > 0; {
		fit := -1
		for i, g := range groups {
			if len(g.gpus) >= need && (fit < 0 || len(g.gpus) < len(groups[fit].gpus)) {
				fit = i
			}
		}
		if fit >= 0 {
			return append(out, groups[fit].gpus[:need]...)
		}
		big := 0
		for i, g := range groups {
			if len(g.gpus) > len(groups[big].gpus) {
				big = i
			}
		}
		out = append(out, groups[big].gpus...)
		need -= len(groups[big].gpus)
		groups = slices.Delete(groups, big, big+1)
	}
	return out
}
