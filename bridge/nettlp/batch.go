package nettlp

import (
	"fmt"
	"net/netip"
)

// batchLen is how many datagrams a Batch holds before Add sends them:
// a 4 KiB read's 16 CplDs, twice.
const batchLen = 32

// Batch queues TLPs for an Adapter and sends them with Flush: one
// sendmmsg per run of consecutive datagrams on one tag port instead of
// one sendto each (a 4 KiB read's 16 CplDs share a tag, so one call).
// Datagrams leave in the order they were added, numbered as Send numbers
// them. Not safe for concurrent use; it allocates only in NewBatch.
type Batch struct {
	a    *Adapter
	bufs [][]byte // batchLen buffers of MaxDatagram
	msgs []batchMsg
	n    int
	sys  batchSys
}

// batchMsg is one queued datagram.
type batchMsg struct {
	port int // tag socket
	dst  netip.AddrPort
	f    []byte // header and TLP, in bufs[i]
}

// NewBatch returns an empty batch sending through a.
func (a *Adapter) NewBatch() *Batch {
	b := &Batch{a: a, bufs: make([][]byte, batchLen), msgs: make([]batchMsg, batchLen)}
	slab := make([]byte, batchLen*MaxDatagram)
	for i := range b.bufs {
		b.bufs[i] = slab[i*MaxDatagram : (i+1)*MaxDatagram : (i+1)*MaxDatagram]
	}
	b.sys.init(a.tr)
	return b
}

// Len returns how many datagrams wait for Flush.
func (b *Batch) Len() int { return b.n }

// Add queues tlp (copied) for the host; a full batch is flushed first.
// It returns an error for a TLP the adapter cannot send (nothing queued)
// and the error of that flush, whose unsent datagrams are counted in
// lost.
func (b *Batch) Add(tlp []byte) (lost int, err error) {
	a := b.a
	if len(tlp) == 0 || len(tlp) > MaxDatagram-HeaderLen {
		return 0, fmt.Errorf("%w: TLP of %d bytes (want 1..%d)", ErrMalformedRequest, len(tlp), MaxDatagram-HeaderLen)
	}
	port, dst, err := a.route(tlp)
	if err != nil {
		return 0, err
	}
	if b.n == len(b.msgs) {
		// A failed flush empties the batch too: queue this one anyway.
		lost, err = b.Flush()
	}
	f := b.bufs[b.n][:HeaderLen+len(tlp)]
	copy(f[HeaderLen:], tlp)
	Header(f).Put(uint16(a.tr.seq[port].Add(1)-1), a.tr.Timestamp())
	b.msgs[b.n] = batchMsg{port: port, dst: dst, f: f}
	b.n++
	return lost, err
}

// Flush sends what is queued and empties the batch. On a failed send it
// goes on with the next run (another socket may work) and returns the
// first error and how many datagrams were not sent.
func (b *Batch) Flush() (lost int, err error) {
	for i := 0; i < b.n; {
		j := i + 1
		for j < b.n && b.msgs[j].port == b.msgs[i].port {
			j++
		}
		sent, e := b.sys.send(b.a.tr, b.msgs[i:j])
		b.a.stats.Completions.Add(uint64(sent))
		if e != nil {
			b.a.stats.SendErrors.Add(uint64(j - i - sent))
			lost += j - i - sent
			if err == nil {
				err = e
			}
		}
		i = j
	}
	clear(b.msgs[:b.n])
	b.n = 0
	return lost, err
}
