package bridge

import (
	"testing"
	"time"

	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
)

// TestIdleWakes: a host whose second read waits for a non-posted credit
// stops walking its queues (idle), and each change that can let a queued
// TLP go, or make one stale, wakes it at the next NextFrame, exactly as if
// it had walked them every time.
func TestIdleWakes(t *testing.T) {
	tests := []struct {
		name  string
		event func(t *testing.T, p *testPair)
		// Wanted a millisecond later: TLPs the host sent, queued
		// requests it dropped as stale, TLPs still pending.
		sent, stale, pending int
	}{
		{"credit update", func(t *testing.T, p *testPair) {
			p.accept[1] = AcceptAll // the GPU takes the first read and releases its credit
		}, 2, 0, 0},
		{"posted write passes the stalled read", func(t *testing.T, p *testPair) {
			p.send(p.h, mwr(0x5000, 16))
		}, 2, 0, 1},
		{"queued read times out", func(t *testing.T, p *testPair) {
			p.advance(6*time.Millisecond, 500*time.Microsecond)
		}, 1, 1, 0},
		{"forged completion ends the queued read's tag", func(t *testing.T, p *testPair) {
			q := &p.h.pending[tlp.NonPosted]
			m := q.peek()
			req := tlp.View(p.h.txPool.bytes(m.slot, int(m.n)))
			forged := forgedTLPFrame(t, p.h.reorder.next, cpld(gpuFn, req.RequesterID(), req.Tag(), 4, 0, []byte{1, 2, 3, 4}))
			if err := p.h.HandleFrame(p.now, forged); err != nil {
				t.Fatal(err)
			}
		}, 1, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gc := Config{}
			gc.Credits[tlp.NonPosted] = ClassCredits{Headers: 1, Data: 32}
			p := newTestPair(t, Config{CompletionTimeout: 5 * time.Millisecond, PeerID: gpuFn}, gc)
			p.up()
			p.accept[1] = 0 // the GPU leaves the first read queued: no credit comes back
			p.send(p.h, mrd(hostRC, 1, 0x1000, 4))
			p.send(p.h, mrd(hostRC, 2, 0x2000, 4))
			p.run()
			if c := p.h.Counters(); c.TLPsSent != 1 || !p.h.idle {
				t.Fatalf("before: host sent %d TLPs, idle %v; want 1 sent and idle", c.TLPsSent, p.h.idle)
			}
			tc.event(t, p)
			p.advance(time.Millisecond, 50*time.Microsecond) // acks and credit updates wait AckDelay
			c := p.h.Counters()
			if c.TLPsSent != uint64(tc.sent) || c.StaleRequestsDropped != uint64(tc.stale) || p.h.Pending() != tc.pending {
				t.Fatalf("host sent %d, dropped %d stale, %d pending; want %d, %d, %d (%s)",
					c.TLPsSent, c.StaleRequestsDropped, p.h.Pending(), tc.sent, tc.stale, tc.pending, p.h.DebugString())
			}
			if err := p.h.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// forgedTLPFrame is a TLP frame carrying pk at sequence number seq, with no
// ack or credit fields: what an attacker on the path could inject.
func forgedTLPFrame(t *testing.T, seq uint32, pk tlp.Packet) []byte {
	t.Helper()
	raw := enc(pk)
	f := make([]byte, encap.HeaderLen+2+len(raw))
	h := encap.Header(f)
	h.SetVersionFlags(encap.Version, 0)
	h.SetType(encap.MsgTLP)
	h.SetPairID(0x123456)
	h.SetCount(1)
	h.SetBodyLen(2 + len(raw))
	h.SetSeq(seq)
	f[encap.HeaderLen], f[encap.HeaderLen+1] = byte(len(raw)>>8), byte(len(raw))
	copy(f[encap.HeaderLen+2:], raw)
	return f
}
