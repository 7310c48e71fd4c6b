package bridge

import (
	"testing"

	"github.com/dxpu/dxpu/tlp"
)

var (
	reqA = tlp.NewID(1, 0, 0)
	reqB = tlp.NewID(2, 0, 0)
)

// metaFor is the queue entry of packet p (encoded, then described as the
// bridge describes every TLP it queues), with arrival order order.
func metaFor(t *testing.T, p tlp.Packet, order uint64) meta {
	t.Helper()
	raw, err := p.AppendTo(nil)
	if err != nil {
		t.Fatalf("encoding %v: %v", p.Kind, err)
	}
	v, err := tlp.Parse(raw)
	if err != nil {
		t.Fatalf("parsing %v: %v", p.Kind, err)
	}
	var m meta
	m.fill(v, 0)
	m.order = order
	return m
}

func withAttr(p tlp.Packet, attr uint8) tlp.Packet { p.Attr = attr; return p }

func postedWrite(req tlp.ID) tlp.Packet {
	p := mwr(0x1000, 64)
	p.RequesterID = req
	return p
}

func fetchAdd(req tlp.ID) tlp.Packet {
	return tlp.Packet{Kind: tlp.FetchAdd, RequesterID: req, Tag: 9, Address: 0x2000, Data: []byte{0, 0, 0, 1}}
}

// cplNoData is the completion of an IO or config write: no data, SC.
func cplNoData(completer tlp.ID) tlp.Packet {
	return tlp.Packet{Kind: tlp.Cpl, CompleterID: completer, RequesterID: hostRC, Tag: 4, ByteCount: 4}
}

// TestOrderingTable checks mustWait, for a later TLP queued behind an
// earlier posted write, against the PCIe ordering table
// (../shared/reference/pcie-tlp.md, column "posted"):
//
//	read request          no (yes with IDO, for another requester)
//	non-posted with data  no (yes with RO, or IDO for another requester)
//	completion            no (yes with RO, IDO for another ID, or an IO/config write completion)
//
// Posted writes stay FIFO (the stricter choice the table permits). A TLP
// that arrived before the posted write never waits for it.
func TestOrderingTable(t *testing.T) {
	const ro, ido = tlp.AttrRO, tlp.AttrIDO
	read := func(req tlp.ID) tlp.Packet { return mrd(req, 1, 0x3000, 64) }
	cpl := func(completer tlp.ID) tlp.Packet { return cpld(completer, hostRC, 2, 4, 0, []byte{1, 2, 3, 4}) }
	tests := []struct {
		name   string
		later  tlp.Packet
		writer tlp.ID // requester of the earlier posted write
		wait   bool
	}{
		{"posted behind posted", postedWrite(reqA), reqA, true},
		{"posted with RO behind posted", withAttr(postedWrite(reqA), ro), reqA, true},
		{"posted with IDO, other requester", withAttr(postedWrite(reqB), ido), reqA, true},

		{"read", read(reqA), reqA, true},
		{"read with RO", withAttr(read(reqA), ro), reqA, true},
		{"read with RO, other requester", withAttr(read(reqB), ro), reqA, true},
		{"read with IDO, same requester", withAttr(read(reqA), ido), reqA, true},
		{"read with IDO, other requester", withAttr(read(reqB), ido), reqA, false},
		{"read with RO and IDO, same requester", withAttr(read(reqA), ro|ido), reqA, true},

		{"non-posted with data", fetchAdd(reqA), reqA, true},
		{"non-posted with data, RO", withAttr(fetchAdd(reqA), ro), reqA, false},
		{"non-posted with data, IDO, same requester", withAttr(fetchAdd(reqA), ido), reqA, true},
		{"non-posted with data, IDO, other requester", withAttr(fetchAdd(reqB), ido), reqA, false},

		{"completion", cpl(gpuFn), reqA, true},
		{"completion with RO", withAttr(cpl(gpuFn), ro), reqA, false},
		{"completion with IDO, completer is the writer", withAttr(cpl(reqA), ido), reqA, true},
		{"completion with IDO, other completer", withAttr(cpl(gpuFn), ido), reqA, false},
		{"IO/config write completion", cplNoData(gpuFn), reqA, false},
		{"UR completion without data (a failed read)", tlp.Packet{Kind: tlp.Cpl, CompleterID: gpuFn, RequesterID: hostRC, Tag: 4, Status: tlp.StatusUR, ByteCount: 4}, reqA, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			posted := newFifo[meta](4)
			posted.push(metaFor(t, postedWrite(tc.writer), 1))
			later := metaFor(t, tc.later, 2)
			got := mustWait(&later, &posted)
			if later.class == tlp.Posted {
				// Posted TLPs share one FIFO, which keeps their order;
				// the pairwise rule must agree.
				got = !mayPassPosted(&later, posted.peek())
			}
			if got != tc.wait {
				t.Errorf("%v (attr %#x) behind a posted write of %v: mustWait %v, want %v", tc.later.Kind, tc.later.Attr, tc.writer, got, tc.wait)
			}
			// Arrived first: nothing holds it back.
			later.order = 0
			if later.class != tlp.Posted && mustWait(&later, &posted) {
				t.Errorf("%v that arrived before the posted write must not wait for it", tc.later.Kind)
			}
		})
	}
}

// TestIDOPassesEveryEarlierWrite: with IDO a TLP passes only if every
// posted write queued before it is from another requester; one of its own
// anywhere in the queue holds it.
func TestIDOPassesEveryEarlierWrite(t *testing.T) {
	tests := []struct {
		name    string
		writers []tlp.ID
		wait    bool
	}{
		{"all others", []tlp.ID{reqB, reqB, reqB}, false},
		{"own write last", []tlp.ID{reqB, reqB, reqA}, true},
		{"own write first", []tlp.ID{reqA, reqB, reqB}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			posted := newFifo[meta](8)
			for i, w := range tc.writers {
				posted.push(metaFor(t, postedWrite(w), uint64(i)))
			}
			// A write of its own that arrived after it does not count.
			posted.push(metaFor(t, postedWrite(reqA), 10))
			later := metaFor(t, withAttr(mrd(reqA, 1, 0x3000, 64), tlp.AttrIDO), 5)
			if got := mustWait(&later, &posted); got != tc.wait {
				t.Errorf("IDO read of %v behind writes of %v: mustWait %v, want %v", reqA, tc.writers, got, tc.wait)
			}
		})
	}
}

// TestPassingCompletion: behind a completion held by a posted write, the
// first later completion that may pass goes, unless an earlier completion
// of its own transaction is still queued.
func TestPassingCompletion(t *testing.T) {
	cplTag := func(tag uint16, attr uint8) tlp.Packet {
		p := cpld(gpuFn, hostRC, tag, 4, 0, []byte{1, 2, 3, 4})
		p.Attr = attr
		return p
	}
	tests := []struct {
		name  string
		queue []tlp.Packet
		want  int
	}{
		{"RO completion of another transaction", []tlp.Packet{cplTag(1, 0), cplTag(2, tlp.AttrRO)}, 1},
		{"RO completion of the same transaction", []tlp.Packet{cplTag(1, 0), cplTag(1, tlp.AttrRO)}, -1},
		{"none may pass", []tlp.Packet{cplTag(1, 0), cplTag(2, 0), cplTag(3, 0)}, -1},
		{"the first that may", []tlp.Packet{cplTag(1, 0), cplTag(2, 0), cplTag(3, tlp.AttrRO), cplTag(4, tlp.AttrRO)}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			posted := newFifo[meta](1)
			posted.push(metaFor(t, postedWrite(reqA), 0))
			q := newFifo[meta](len(tc.queue))
			for i, p := range tc.queue {
				q.push(metaFor(t, p, uint64(1+i)))
			}
			if got := passingCompletion(&q, &posted, anyMeta); got != tc.want {
				t.Errorf("passingCompletion = %d, want %d", got, tc.want)
			}
		})
	}
}
