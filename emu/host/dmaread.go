package host

import (
	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/tlp"
)

// dmaReads holds the DMA reads waiting for host DRAM. Every read waits the
// same MemLatency and the simulator runs events of one instant in the order
// they were scheduled, so the reads are answered in arrival order: a FIFO
// and one method value serve them all, without a closure per request.
type dmaReads struct {
	q       []dmaRead
	head    int
	answerF func()
	data    [4096]byte // what DRAM returned for the read being answered
}

// dmaRead is one read request as the root port received it.
type dmaRead struct {
	rp     *RootPortFn
	addr   uint64
	n, mps int
	req    tlp.ID
	tag    uint16
}

// dmaRead queues a read request; DRAM answers it MemLatency later.
func (rc *RootComplex) dmaRead(rp *RootPortFn, v tlp.View) {
	addr, n := pcie.RequestBytes(v)
	rc.Stats.DMAReads++
	rc.Stats.DMAReadBytes += uint64(n)
	mps := 128 << (rp.Cfg.Get16(PortCapPCIe+8) >> 5 & 7)
	q := &rc.reads
	q.q = append(q.q, dmaRead{rp: rp, addr: addr, n: n, mps: mps, req: v.RequesterID(), tag: v.Tag()})
	rc.s.After(rc.cfg.MemLatency, q.answerF)
}

// answerRead reads memory for the oldest waiting request, as it is now,
// and sends its completions (split at MPS on RCB boundaries).
func (rc *RootComplex) answerRead() {
	q := &rc.reads
	r := q.q[q.head]
	q.q[q.head] = dmaRead{}
	q.head++
	if q.head == len(q.q) {
		q.q, q.head = q.q[:0], 0
	} else if q.head >= 1024 && 2*q.head >= len(q.q) {
		k := copy(q.q, q.q[q.head:])
		clear(q.q[k:])
		q.q, q.head = q.q[:k], 0
	}
	data := q.data[:r.n]
	rc.Mem.Read(r.addr, data)
	end := r.addr + uint64(r.n)
	pcie.SplitCompletion(r.addr, r.n, r.mps, rc.cfg.RCB, func(a uint64, k int) {
		rc.buf = pcie.AppendCplD(rc.buf[:0], 0, r.req, r.tag, int(end-a), a, data[a-r.addr:a-r.addr+uint64(k)])
		r.rp.down.SendTLP(rc.buf)
	})
}
