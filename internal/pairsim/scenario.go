package pairsim

import (
	"fmt"
	"github.com/dxpu/dxpu/bridge/vpair"
	"strings"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/memlink"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// Scenario is one seeded run: a pair with stub endpoints on both sides,
// faults on the links, and optional link flaps.
type Scenario struct {
	Seed     uint64
	Faults   memlink.Faults
	Host     bridge.Config
	GPU      bridge.Config
	Mix      Mix
	Count    int           // TLPs each side issues
	OneWay   bool          // only the host side issues; the GPU side answers
	Interval time.Duration // between them
	// Flaps take both directions down at At for For.
	Flaps []Flap
	// MaxTime bounds the run in virtual time (default 5 s).
	MaxTime time.Duration
	// Setup, if set, is called with the pair before the run: fuzzers use
	// it to schedule frames of their own.
	Setup func(p *vpair.Pair)
	// CheckInvariants checks the bridges' bookkeeping after every step.
	CheckInvariants bool
}

// Flap is one link outage, of both directions or (OneWay 1) host to GPU
// only or (OneWay 2) GPU to host only.
type Flap struct {
	At, For time.Duration
	OneWay  int
}

func flap(p *vpair.Pair, f Flap, down bool) {
	switch f.OneWay {
	case 1:
		p.H2G.SetDown(down)
	case 2:
		p.G2H.SetDown(down)
	default:
		p.SetDown(down)
	}
}

// Result is what a scenario observed, with the invariants checked.
type Result struct {
	Pair      *vpair.Pair
	Host, GPU *Endpoint
	Finished  bool
	End       time.Duration
	LinkDowns int
	// Violations lists every invariant that failed; empty is a pass.
	Violations []string
}

// Run executes the scenario.
func (sc Scenario) Run() Result {
	s := sim.New(sc.Seed)
	f := sc.Faults
	p, err := vpair.NewPair(s, vpair.PairConfig{Host: sc.Host, GPU: sc.GPU, Faults: &f})
	if err != nil {
		return Result{Violations: []string{err.Error()}}
	}
	mix := sc.Mix
	if mix == (Mix{}) {
		mix = DefaultMix
	}
	h := NewEndpoint(p.Host, tlp.NewID(0, 0, 0), mix, sc.Count, sc.Interval)
	gcount := sc.Count
	if sc.OneWay {
		gcount = 0
	}
	g := NewEndpoint(p.GPU, tlp.NewID(3, 0, 0), mix, gcount, sc.Interval)
	p.Host.CheckInvariants, p.GPU.CheckInvariants = sc.CheckInvariants, sc.CheckInvariants
	for _, fl := range sc.Flaps {
		s.At(fl.At, func() { flap(p, fl, true) })
		s.At(fl.At+fl.For, func() { flap(p, fl, false) })
	}
	if sc.Setup != nil {
		sc.Setup(p)
	}
	h.Start()
	g.Start()
	maxT := sc.MaxTime
	if maxT == 0 {
		maxT = 5 * time.Second
	}
	var lastFlap time.Duration
	for _, fl := range sc.Flaps {
		lastFlap = max(lastFlap, fl.At+fl.For)
	}
	quiet := func() bool {
		return h.Done() && g.Done() && s.Now() > lastFlap && p.Up() &&
			p.Host.Bridge.Pending() == 0 && p.GPU.Bridge.Pending() == 0 &&
			p.Host.Backlog() == 0 && p.GPU.Backlog() == 0 &&
			p.Host.Bridge.Queued() == 0 && p.GPU.Bridge.Queued() == 0
	}
	finished := s.RunWhile(func() bool { return !quiet() && s.Now() < maxT }, 50_000_000) && quiet()
	r := Result{Pair: p, Host: h, GPU: g, Finished: finished, End: s.Now()}
	r.check()
	return r
}

func (r *Result) fail(format string, args ...any) {
	r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
}

func (r *Result) check() {
	if !r.Finished {
		r.fail("did not finish by %s: host done %v (out %d) gpu done %v (out %d), pending %d/%d, backlog %d/%d, state %v/%v",
			sim.FormatDuration(r.End), r.Host.Done(), r.Host.Outstanding(), r.GPU.Done(), r.GPU.Outstanding(),
			r.Pair.Host.Bridge.Pending(), r.Pair.GPU.Bridge.Pending(), r.Pair.Host.Backlog(), r.Pair.GPU.Backlog(),
			r.Pair.Host.Bridge.State(), r.Pair.GPU.Bridge.State())
	}
	downs := 0
	for _, e := range append(append([]bridge.Event(nil), r.Host.Events...), r.GPU.Events...) {
		if e.Kind == bridge.EventLinkDown {
			downs++
		}
	}
	r.LinkDowns = downs
	r.checkWrites("host->gpu", r.Host, r.GPU, downs)
	r.checkWrites("gpu->host", r.GPU, r.Host, downs)
	if downs == 0 {
		for _, e := range []*Endpoint{r.Host, r.GPU} {
			if e.OrderViolations > 0 {
				r.fail("%v side: %d requests or completions passed posted writes", e.Side.Name, e.OrderViolations)
			}
		}
	}
	r.checkRequests("host", r.Host, downs)
	r.checkRequests("gpu", r.GPU, downs)
	for _, sd := range []*vpair.Side{r.Pair.Host, r.Pair.GPU} {
		if sd.InvariantErr != nil {
			r.fail("%v", sd.InvariantErr)
		}
	}
	if n := r.Pair.Host.Refused + r.Pair.GPU.Refused; n > 0 {
		r.fail("bridges refused %d stub TLPs as malformed", n)
	}
}

// checkWrites: every posted write the sender issued is delivered exactly
// once and in order, or (only after a link down) reported lost.
func (r *Result) checkWrites(dir string, from, to *Endpoint, downs int) {
	if to.Duplicated > 0 {
		r.fail("%s: %d posted writes delivered twice", dir, to.Duplicated)
	}
	if to.Misordered > 0 {
		r.fail("%s: %d posted writes out of order", dir, to.Misordered)
	}
	missing := 0
	for n := 0; n < from.WritesSent; n++ {
		if to.seenWrites[int64(n)] == 0 && !from.LostReported[writeBase+uint64(n)*4096] {
			missing++
		}
	}
	if missing > 0 {
		r.fail("%s: %d posted writes neither delivered nor reported lost", dir, missing)
	}
	if downs == 0 && len(from.LostReported) > 0 {
		r.fail("%s: %d posted writes reported lost without a link down", dir, len(from.LostReported))
	}
}

// checkRequests: every request got exactly one final completion.
func (r *Result) checkRequests(name string, e *Endpoint, downs int) {
	if e.ExtraCpls > 0 {
		r.fail("%s: %d completions for requests already answered", name, e.ExtraCpls)
	}
	if e.BadCpls > 0 {
		r.fail("%s: %d completions with a wrong byte count or data", name, e.BadCpls)
	}
	if n := e.Outstanding(); n > 0 {
		r.fail("%s: %d requests unanswered", name, n)
	}
	if e.Completed+e.Failed+e.Outstanding() != e.ReadsSent {
		r.fail("%s: %d requests, %d completed, %d failed", name, e.ReadsSent, e.Completed, e.Failed)
	}
	if downs == 0 && e.Failed > 0 {
		timeouts := 0
		for _, ev := range e.Events {
			if ev.Kind == bridge.EventCompletionTimeout {
				timeouts++
			}
		}
		if timeouts == 0 {
			r.fail("%s: %d requests failed without a link down or timeout", name, e.Failed)
		}
	}
}

// String summarizes the result for test logs.
func (r Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "finished=%v end=%v downs=%d", r.Finished, r.End, r.LinkDowns)
	if r.Host != nil {
		fmt.Fprintf(&b, " host[w %d->%d r %d ok %d fail %d lost %d] gpu[w %d->%d r %d ok %d fail %d lost %d]",
			r.Host.WritesSent, r.GPU.WritesRecv, r.Host.ReadsSent, r.Host.Completed, r.Host.Failed, len(r.Host.LostReported),
			r.GPU.WritesSent, r.Host.WritesRecv, r.GPU.ReadsSent, r.GPU.Completed, r.GPU.Failed, len(r.GPU.LostReported))
		if !r.Finished {
			fmt.Fprintf(&b, "\n  host: %s\n  gpu: %s\n  gpuctr %+v", r.Pair.Host.Bridge.DebugString(), r.Pair.GPU.Bridge.DebugString(), r.Pair.GPU.Bridge.Counters())
		}
		c := r.Pair.Host.Bridge.Counters()
		fmt.Fprintf(&b, " hostctr[retx %d rto %d dup %d nak %d stalls %v]", c.Retransmits, c.RTOs, c.Duplicates, c.NaksSent, c.CreditStalls)
	}
	for _, v := range r.Violations {
		b.WriteString("\n  VIOLATION: " + v)
	}
	return b.String()
}
