package model

import (
	"time"
)

// Cause is a source of fabric overhead.
type Cause uint8

const (
	CauseLaunch Cause = iota // launches reaching an idle stream later
	CauseSync                // completion notifications reaching a waiting CPU later
	CauseH2D                 // slower or later host-to-device copies
	CauseD2H                 // later device-to-host copies
	CauseMMIO                // CPU stalls on MMIO reads
	numCauses
)

// Causes lists every cause in report order.
var Causes = []Cause{CauseLaunch, CauseSync, CauseH2D, CauseD2H, CauseMMIO}

func (c Cause) String() string {
	switch c {
	case CauseLaunch:
		return "launch"
	case CauseSync:
		return "sync"
	case CauseH2D:
		return "h2d"
	case CauseD2H:
		return "d2h"
	case CauseMMIO:
		return "mmio"
	}
	return "unknown"
}

// Breakdown is time by cause.
type Breakdown [numCauses]time.Duration

// Total is the sum over causes.
func (b Breakdown) Total() time.Duration {
	var t time.Duration
	for _, d := range b {
		t += d
	}
	return t
}

// Timing is a graph re-timed under a fabric.
type Timing struct {
	Start, End []time.Duration // per node, relative to Graph.Origin
	// Span is the last re-timed end minus the first measured start.
	Span time.Duration
	// Critical is what the fabric added along the critical path that ends
	// the re-timed run, by cause.
	Critical Breakdown
}

// Work returns how long node i takes once started behind f.
func (g *Graph) work(i int, f *Fabric) time.Duration {
	n := &g.Nodes[i]
	switch n.Kind {
	case Call:
		return n.Work + time.Duration(n.MMIOReads)*f.MMIOReadCost()
	case Memcpy:
		return f.CopyTime(n.Copy, n.Bytes, n.Work)
	}
	return n.Work
}

// penalty is what f adds to an edge of kind k.
func penalty(k EdgeKind, f *Fabric) time.Duration {
	switch k {
	case Launch:
		return f.LaunchCost()
	case Wait:
		return f.SyncCost()
	}
	return 0
}

// Retime computes every node's start and end behind fabric f:
//
//	start(n) = max over edges e into n's start of (point(e.From) + e.Delay + penalty(e)) + n.Slack
//	           (the measured start when no edge leads to it)
//	end(n)   = max(start(n) + work(n), max over Wait edges e of (end(e.From) + e.Delay + SyncCost))
//
// With Native it reproduces the measured times exactly.
func (g *Graph) Retime(f Fabric) *Timing {
	n := len(g.Nodes)
	t := &Timing{Start: make([]time.Duration, n), End: make([]time.Duration, n)}
	bindStart := make([]int32, n)
	bindEnd := make([]int32, n)
	pen := [6]time.Duration{}
	for k := EdgeKind(1); k <= Event; k++ {
		pen[k] = penalty(k, &f)
	}
	for _, p := range g.schedule {
		i := int(p.Node)
		nd := &g.Nodes[i]
		edges := g.Edges[nd.edgeLo:nd.edgeHi]
		if !p.End {
			ready, bind := nd.Start, int32(-1)
			for k := range edges {
				e := &edges[k]
				if e.ToEnd() {
					continue
				}
				at := t.End[e.From]
				if e.FromStart() {
					at = t.Start[e.From]
				}
				at += e.Delay + pen[e.Kind]
				if bind < 0 || at > ready {
					ready, bind = at, nd.edgeLo+int32(k)
				}
			}
			t.Start[i], bindStart[i] = ready+nd.Slack, bind
			continue
		}
		end, bind := t.Start[i]+g.work(i, &f), int32(-1)
		for k := range edges {
			e := &edges[k]
			if !e.ToEnd() {
				continue
			}
			if at := t.End[e.From] + e.Delay + pen[e.Kind]; at > end {
				end, bind = at, nd.edgeLo+int32(k)
			}
		}
		t.End[i], bindEnd[i] = end, bind
	}
	if n == 0 {
		return t
	}
	// The run begins when it was measured to begin; an operation that the
	// fabric delays does not move the origin.
	first, last, lastNode := g.Nodes[0].Start, t.End[0], 0
	for i := range n {
		first = min(first, g.Nodes[i].Start)
		if t.End[i] > last {
			last, lastNode = t.End[i], i
		}
	}
	t.Span = last - first
	t.Critical = g.critical(t, &f, lastNode, bindStart, bindEnd, pen)
	return t
}

// critical walks back from the point that ends the run along the
// dependencies that set each time, adding up what the fabric put there.
func (g *Graph) critical(t *Timing, f *Fabric, i int, bindStart, bindEnd []int32, pen [6]time.Duration) Breakdown {
	var b Breakdown
	atEnd := true
	for steps := 0; steps <= 2*len(g.Nodes); steps++ {
		nd := &g.Nodes[i]
		if atEnd {
			if k := bindEnd[i]; k >= 0 {
				e := &g.Edges[k]
				b[CauseSync] += pen[e.Kind]
				i = int(e.From)
				continue
			}
			if extra := g.work(i, f) - nd.Work; extra > 0 {
				switch {
				case nd.Kind == Call:
					b[CauseMMIO] += extra
				case nd.Copy == H2D:
					b[CauseH2D] += extra
				case nd.Copy == D2H:
					b[CauseD2H] += extra
				}
			}
			atEnd = false
			continue
		}
		k := bindStart[i]
		if k < 0 {
			break
		}
		e := &g.Edges[k]
		if e.Kind == Launch {
			b[CauseLaunch] += pen[e.Kind]
		}
		i, atEnd = int(e.From), !e.FromStart()
	}
	return b
}
