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
	"github.com/dxpu/dxpu/bridge/udp"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/tlp/encap"
)

// Frames of pairs the agent does not hold, sealed under their own pair's
// key or not sealed, arriving on the shared socket, are the agent's
// unknown-pair drops (status frames_unknown_pair): they never reach a pair
// the agent runs, whose bridge counts nothing for them (not as forged, not
// as unsealed).
func TestMuxUnknownPairNotChargedToAPair(t *testing.T) {
	t.Parallel()
	m, err := udp.ListenMux(netip.MustParseAddrPort("127.0.0.1:0"))
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
