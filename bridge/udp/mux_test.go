package udp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/waitfor"
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

// loopbackMux is a mux on 127.0.0.1 without steering (every pair through
// the queues), closed when tb ends.
func loopbackMux(tb testing.TB) *Mux {
	tb.Helper()
	m, err := listenMux(netip.MustParseAddrPort("127.0.0.1:0"), false)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { m.Close() })
	return m
}

// dispatchOne hands the mux one frame, as Run does a batch.
func (m *Mux) dispatchOne(f []byte) { m.dispatch([][]byte{f[:cap(f)]}, []int{len(f)}) }

// The tests of this file run the mux without steering: every pair
// through its queue (the path of a kernel without it, and of non-Linux).

// TestMuxDemultiplexes: frames reach the pair their header names; frames
// of unknown pairs, of another version or too short are counted and their
// buffers come back; a closed pair's queued frames are recycled.
func TestMuxDemultiplexes(t *testing.T) {
	t.Parallel()
	m := loopbackMux(t)
	a, _ := m.Open(5, m.LocalAddr())
	b, _ := m.Open(1<<24-1, m.LocalAddr())
	if _, err := m.Open(5, m.LocalAddr()); err == nil {
		t.Fatal("a second connection for pair 5")
	}
	m.dispatchOne(frameFor(m, 5, encap.Version))
	m.dispatchOne(frameFor(m, 1<<24-1, encap.Version))
	m.dispatchOne(frameFor(m, 6, encap.Version))
	m.dispatchOne(frameFor(m, 5, 2))
	m.dispatchOne((<-m.free)[:10])
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
	m.dispatchOne(frameFor(m, 5, encap.Version))
	a.Close()
	if _, err := a.Recv(buf); err == nil {
		t.Fatal("Recv on a closed pair succeeded")
	}
	m.dispatchOne(frameFor(m, 5, encap.Version))
	if m.Unknown.Load() != 2 {
		t.Fatal("a closed pair still takes frames")
	}
	if len(m.free) != muxBuffers {
		t.Fatalf("%d of %d buffers back on the free list", len(m.free), muxBuffers)
	}
}

// BenchmarkMuxFrame is the per-frame path: demultiplex, queue, Recv.
func BenchmarkMuxFrame(b *testing.B) {
	m := loopbackMux(b)
	pc, _ := m.Open(7, m.LocalAddr())
	buf := make([]byte, MuxMaxFrame)
	b.ReportAllocs()
	for b.Loop() {
		fr := (<-m.free)[:1400]
		h := encap.Header(fr)
		h.SetVersionFlags(encap.Version, 0)
		h.SetPairID(7)
		m.dispatchOne(fr)
		if _, err := pc.Recv(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// muxFrame is a minimal frame of pair id carrying seq in its body.
func muxFrame(id uint32, seq byte) []byte {
	f := make([]byte, encap.HeaderLen+1)
	h := encap.Header(f)
	h.SetVersionFlags(encap.Version, 0)
	h.SetPairID(id)
	f[encap.HeaderLen] = seq
	return f
}

// A burst on the shared socket is read a batch per system call and each
// pair takes its frames in batches, in order: 40 frames of two pairs,
// interleaved and all queued before Run starts, take fewer than 40
// receive calls (one datagram per read took 40), and each pair's 20 come
// out of one TryRecvBatch, in the order sent.
func TestMuxTakesBursts(t *testing.T) {
	m := loopbackMux(t)
	a, _ := m.Open(1, m.LocalAddr())
	b, _ := m.Open(2, m.LocalAddr())
	src, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(m.LocalAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	const each = 20
	for i := range each {
		for _, id := range []uint32{1, 2} {
			if _, err := src.Write(muxFrame(id, byte(i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for _, pc := range []*MuxConn{a, b} {
		waitfor.Until(t, fmt.Sprintf("pair %d's frames queued", pc.id), func() bool {
			pc.mu.Lock()
			defer pc.mu.Unlock()
			return pc.n == each
		})
	}
	if c := m.recvCalls.Load(); c >= 2*each {
		t.Errorf("%d receive calls for %d datagrams: not batched", c, 2*each)
	}
	bufs, sizes := make([][]byte, 64), make([]int, 64)
	for i := range bufs {
		bufs[i] = make([]byte, MuxMaxFrame)
	}
	for _, pc := range []*MuxConn{a, b} {
		k, err := pc.TryRecvBatch(bufs, sizes)
		if err != nil || k != each {
			t.Fatalf("pair %d: took %d frames in one call (%v), want %d", pc.id, k, err, each)
		}
		for i := range k {
			f := bufs[i][:sizes[i]]
			if encap.Header(f).PairID() != pc.id || f[encap.HeaderLen] != byte(i) {
				t.Fatalf("pair %d frame %d: pair %d seq %d", pc.id, i, encap.Header(f).PairID(), f[encap.HeaderLen])
			}
		}
	}
}

// A pair waiting on the shared socket (WaitReadable, as a polling runner
// does) wakes when a frame of its own is queued and not for another
// pair's, and with an error once closed; a closed pair's receive calls
// fail instead of waiting.
func TestMuxConnWaitReadable(t *testing.T) {
	m := loopbackMux(t)
	a, _ := m.Open(1, m.LocalAddr())
	m.Open(2, m.LocalAddr())
	woke := make(chan error, 1)
	go func() { woke <- a.WaitReadable() }()
	m.dispatchOne(append((<-m.free)[:0], muxFrame(2, 0)...))
	select {
	case err := <-woke:
		t.Fatalf("pair 1 woke (%v) for pair 2's frame", err)
	case <-time.After(50 * time.Millisecond):
	}
	m.dispatchOne(append((<-m.free)[:0], muxFrame(1, 7)...))
	if err := waitfor.Receive(t, woke, "pair 1 woken by its frame"); err != nil {
		t.Fatalf("WaitReadable: %v", err)
	}
	buf := make([]byte, MuxMaxFrame)
	if n, err := a.Recv(buf); err != nil || buf[n-1] != 7 {
		t.Fatalf("Recv: %d bytes, %v", n, err)
	}
	go func() { woke <- a.WaitReadable() }()
	a.Close()
	if err := waitfor.Receive(t, woke, "a closed pair's wait ended"); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("WaitReadable after Close: %v, want net.ErrClosed", err)
	}
	if _, err := a.TryRecvBatch([][]byte{buf}, []int{0}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("TryRecvBatch after Close: %v, want net.ErrClosed", err)
	}
}

// A pair's batch goes out on the shared socket to its peer, every frame
// whole and in order, and what the peer answers comes back to the pair.
func TestMuxConnSendBatch(t *testing.T) {
	m := loopbackMux(t)
	peer, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	pc, _ := m.Open(3, peer.LocalAddr().(*net.UDPAddr).AddrPort())
	var frames [][]byte
	for i := range 50 {
		frames = append(frames, muxFrame(3, byte(i)))
	}
	if n, err := pc.SendBatch(frames); n != len(frames) || err != nil {
		t.Fatalf("SendBatch: %d of %d, %v", n, len(frames), err)
	}
	buf := make([]byte, MuxMaxFrame)
	for i := range frames {
		if err := peer.SetReadDeadline(time.Now().Add(waitfor.Stall)); err != nil {
			t.Fatal(err)
		}
		n, from, err := peer.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !bytes.Equal(buf[:n], frames[i]) || from.Port() != m.LocalAddr().Port() {
			t.Fatalf("frame %d from %v: % x, want % x from the mux's port", i, from, buf[:n], frames[i])
		}
	}
}
