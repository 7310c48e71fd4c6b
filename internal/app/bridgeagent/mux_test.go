package bridgeagent

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/seal"
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
	buf := make([]byte, maxFrame)
	for _, pc := range []*pairConn{a, b} {
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
	buf := make([]byte, maxFrame)
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

// Frames of pairs the agent does not hold, sealed under their own pair's
// key or not sealed, arriving on the shared socket, are the agent's
// unknown-pair drops (status frames_unknown_pair): they never reach a pair
// the agent runs, whose bridge counts nothing for them (not as forged, not
// as unsealed).
func TestMuxUnknownPairNotChargedToAPair(t *testing.T) {
	t.Parallel()
	m, err := ListenMux(netip.MustParseAddrPort("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	muxDone := make(chan struct{})
	go func() { defer close(muxDone); _ = m.Run(ctx) }()
	// Pair 1, keyed, talking to a peer that stays silent.
	peer, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	conn, err := m.Open(1, peer.LocalAddr().(*net.UDPAddr).AddrPort())
	if err != nil {
		t.Fatal(err)
	}
	key := bytes.Repeat([]byte{1}, 32)
	b, err := bridge.New(bridge.Config{Role: bridge.RoleGPU, PairID: 1, Key: key, RequireKeys: true})
	if err != nil {
		t.Fatal(err)
	}
	r := driver.New(b, conn)
	runDone := make(chan struct{})
	go func() { defer close(runDone); _ = r.Run(ctx) }()
	defer func() { cancel(); conn.Close(); m.Close(); <-runDone; <-muxDone }()

	// Pair 2's frames: a HELLO sealed under pair 2's key, and unsealed.
	frame := func(pair uint32) []byte {
		body := (&encap.Control{Type: encap.CtlHello, Role: bridge.RoleHost, Session: 5, Window: 64}).AppendTo(nil)
		body = append(body, make([]byte, bridge.KeyNonceLen)...)
		f := make([]byte, encap.HeaderLen, encap.HeaderLen+len(body))
		h := encap.Header(f)
		h.SetVersionFlags(encap.Version, 0)
		h.SetType(encap.MsgControl)
		h.SetPairID(pair)
		h.SetBodyLen(len(body))
		return append(f, body...)
	}
	ch, err := seal.New(seal.Config{PairID: 2, Role: bridge.RoleHost, Mode: seal.ModeGCM}, 0, key)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := ch.SealHandshake(nil, frame(2), 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	attacker, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	defer attacker.Close()
	const n = 10
	for i := range n {
		f := frame(2)
		if i%2 == 0 {
			f = sealed
		}
		if _, err := attacker.WriteToUDPAddrPort(f, m.LocalAddr()); err != nil {
			t.Fatal(err)
		}
	}
	waitfor.Until(t, "pair 2's frames dropped", func() bool { return m.Unknown.Load()+r.Counters().FramesDropped == n })
	if got := m.Unknown.Load(); got != n {
		t.Errorf("agent counted %d unknown-pair frames, want %d", got, n)
	}
	c := r.Counters()
	if c.FramesDropped != 0 || c.DroppedForged != 0 || c.DroppedUnsealed != 0 || c.DroppedUnknownPair != 0 || c.FramesReceived != 0 {
		t.Fatalf("pair 1 charged for pair 2's frames: dropped %d (forged %d, unsealed %d, unknown pair %d), received %d",
			c.FramesDropped, c.DroppedForged, c.DroppedUnsealed, c.DroppedUnknownPair, c.FramesReceived)
	}
	if m.Malformed.Load() != 0 || m.Overflow.Load() != 0 {
		t.Fatalf("malformed %d overflow %d, want 0", m.Malformed.Load(), m.Overflow.Load())
	}
}
