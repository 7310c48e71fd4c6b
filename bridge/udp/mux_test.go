package udp

import (
	"net/netip"
	"testing"

	"github.com/dxpu/dxpu/tlp/encap"
)

// frameFor returns a buffer from m's free list holding a minimal frame of
// pair id (version v).
func frameFor(m *Mux, id uint32, v uint8) []byte {
	f := (<-m.free)[:encap.HeaderLen]
	clear(f)
	h := encap.Header(f)
	h.SetVersionFlags(v, 0)
	h.SetPairID(id)
	return f
}

// TestMuxDemultiplexes: frames reach the pair their header names; frames
// of unknown pairs, of another version or too short are counted and their
// buffers come back; a closed pair's queued frames are recycled.
func TestMuxDemultiplexes(t *testing.T) {
	t.Parallel()
	m, err := ListenMux(netip.MustParseAddrPort("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	a, _ := m.Open(5, m.LocalAddr())
	b, _ := m.Open(1<<24-1, m.LocalAddr())
	if _, err := m.Open(5, m.LocalAddr()); err == nil {
		t.Fatal("a second connection for pair 5")
	}
	m.dispatch(frameFor(m, 5, encap.Version))
	m.dispatch(frameFor(m, 1<<24-1, encap.Version))
	m.dispatch(frameFor(m, 6, encap.Version))
	m.dispatch(frameFor(m, 5, 2))
	m.dispatch((<-m.free)[:10])
	buf := make([]byte, MuxMaxFrame)
	for _, pc := range []*MuxConn{a, b} {
		n, err := pc.Recv(buf)
		if err != nil || n != encap.HeaderLen || encap.Header(buf).PairID() != pc.id {
			t.Fatalf("pair %d received %d bytes of pair %d, %v", pc.id, n, encap.Header(buf).PairID(), err)
		}
	}
	if m.Unknown.Load() != 1 || m.Malformed.Load() != 2 {
		t.Fatalf("unknown %d malformed %d, want 1 and 2", m.Unknown.Load(), m.Malformed.Load())
	}
	m.dispatch(frameFor(m, 5, encap.Version))
	a.Close()
	if _, err := a.Recv(buf); err == nil {
		t.Fatal("Recv on a closed pair succeeded")
	}
	m.dispatch(frameFor(m, 5, encap.Version))
	if m.Unknown.Load() != 2 {
		t.Fatal("a closed pair still takes frames")
	}
	if len(m.free) != muxBuffers {
		t.Fatalf("%d of %d buffers back on the free list", len(m.free), muxBuffers)
	}
}

// BenchmarkMuxFrame is the per-frame path: demultiplex, queue, Recv.
func BenchmarkMuxFrame(b *testing.B) {
	m, err := ListenMux(netip.MustParseAddrPort("127.0.0.1:0"))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	pc, _ := m.Open(7, m.LocalAddr())
	buf := make([]byte, MuxMaxFrame)
	b.ReportAllocs()
	for b.Loop() {
		fr := (<-m.free)[:1400]
		h := encap.Header(fr)
		h.SetVersionFlags(encap.Version, 0)
		h.SetPairID(7)
		m.dispatch(fr)
		if _, err := pc.Recv(buf); err != nil {
			b.Fatal(err)
		}
	}
}
