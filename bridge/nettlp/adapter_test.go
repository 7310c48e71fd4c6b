package nettlp

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/tlp"
)

// startAdapter runs an Adapter on local towards remote, delivering into a
// channel, until the test ends.
func startAdapter(t *testing.T, local, remote netip.Addr) (*Adapter, <-chan []byte) {
	t.Helper()
	privtest.Loopback(t)
	a, err := NewAdapter(AdapterConfig{Local: local, Remote: remote})
	if err != nil {
		t.Fatalf("cannot bind %v: %v", local, err)
	}
	up := make(chan []byte, 64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- a.Run(ctx, ReceiverFunc(func(b []byte) error { up <- bytes.Clone(b); return nil }))
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(waitfor.Stall):
			t.Error("Run did not return after cancel")
		}
	})
	return a, up
}

func recvTLP(t *testing.T, up <-chan []byte) []byte {
	t.Helper()
	select {
	case b := <-up:
		return b
	case <-time.After(waitfor.Stall):
		t.Fatal("no TLP delivered")
	}
	return nil
}

// TestAdapterHostSide plays the real host's NetTLP adapter with plain
// sockets: its TLPs reach the bridge's Receiver unchanged, and TLPs the
// bridge sends down leave on the port of their tag, from the same port,
// with a running sequence number.
func TestAdapterHostSide(t *testing.T) {
	t.Parallel()
	privtest.Loopback(t)
	local, host := netip.MustParseAddr("127.0.2.1"), netip.MustParseAddr("127.0.2.2")
	a, up := startAdapter(t, local, host)
	hostConns := make([]*net.UDPConn, MaxTags)
	for i := range hostConns {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(host, Port(uint16(i)))))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		hostConns[i] = c
	}

	// Up: an MMIO write from the host, tag 3.
	mmio := []byte{0x40, 0, 0, 1, 0, 0, 3, 0x0f, 0xf0, 0, 0, 0x10, 0xde, 0xad, 0xbe, 0xef}
	if _, err := hostConns[3].WriteToUDPAddrPort(append(make([]byte, HeaderLen), mmio...), netip.AddrPortFrom(local, Port(3))); err != nil {
		t.Fatal(err)
	}
	if got := recvTLP(t, up); !bytes.Equal(got, mmio) {
		t.Fatalf("delivered % x, sent % x", got, mmio)
	}

	// Down: a DMA read with tag 0x27 and a completion with tag 0x05.
	mrd := libtlpMRd(0x1234_5000, 256, 0x27)
	cpl := []byte{0x4a, 0, 0, 1, 0x01, 0x00, 0, 4, 0, 0, 0x05, 0x10, 1, 2, 3, 4}
	var seqs []uint16
	for i, tc := range []struct {
		b    []byte
		port int
	}{{mrd, 7}, {cpl, 5}, {mrd, 7}} {
		if err := a.SendTLP(tc.b); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 2048)
		hostConns[tc.port].SetReadDeadline(time.Now().Add(waitfor.Stall))
		n, from, err := hostConns[tc.port].ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("TLP %d: %v", i, err)
		}
		if from != netip.AddrPortFrom(local, Port(uint16(tc.port))) {
			t.Fatalf("TLP %d from %v", i, from)
		}
		h, b, _ := SplitDatagram(buf[:n])
		if !bytes.Equal(b, tc.b) {
			t.Fatalf("TLP %d arrived as % x", i, b)
		}
		if tc.port == 7 {
			seqs = append(seqs, h.Seq())
		}
	}
	if seqs[1] != seqs[0]+1 {
		t.Fatalf("port 0x3007 sequence numbers %v", seqs)
	}

	// Datagrams from anyone but the adapter are dropped.
	stranger, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr("127.0.2.9"), 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	stranger.WriteToUDPAddrPort(append(make([]byte, HeaderLen), mmio...), netip.AddrPortFrom(local, Port(3)))
	hostConns[3].WriteToUDPAddrPort(append(make([]byte, HeaderLen), cpl...), netip.AddrPortFrom(local, Port(3)))
	if got := recvTLP(t, up); !bytes.Equal(got, cpl) {
		t.Fatalf("after the stranger's datagram, delivered % x", got)
	}
	if a.Stats().Ignored.Load() != 1 {
		t.Fatalf("ignored %d", a.Stats().Ignored.Load())
	}

	if err := a.SendTLP(nil); !errors.Is(err, ErrMalformedRequest) {
		t.Fatalf("empty TLP: %v", err)
	}
}

// TestAdapterAgainstTarget wires the two halves together: a GPU-side DMA
// read sent down through the Adapter reaches an emulated host's NetTLP
// port (a Target), whose completions come back up through the Adapter.
func TestAdapterAgainstTarget(t *testing.T) {
	t.Parallel()
	hostAddr, bridgeAddr := netip.MustParseAddr("127.0.2.3"), netip.MustParseAddr("127.0.2.4")
	mem := newTestMemory(t, 0, 1<<32)
	startTarget(t, hostAddr, mem, CompleterConfig{})
	a, up := startAdapter(t, bridgeAddr, hostAddr)

	data := bytes.Repeat([]byte("dxpu"), 128)
	w := appendLibtlpWrite(nil, 0x8000_0000, data, 0x13, tlp.NewID(0x41, 0, 0))
	if err := a.SendTLP(w[HeaderLen:]); err != nil {
		t.Fatal(err)
	}
	req := libtlpMRd(0x8000_0000, len(data), 0x13)
	if err := a.SendTLP(req); err != nil {
		t.Fatal(err)
	}
	var got []byte
	for len(got) < len(data) {
		b := recvTLP(t, up)
		v, err := tlp.Parse(b)
		if err != nil || v.Kind() != tlp.CplD || v.Tag() != 0x13 {
			t.Fatalf("% x: %v", b, err)
		}
		got = append(got, v.Payload()...)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("DMA read through adapter and target returned other data")
	}
}

func TestRetryReceiver(t *testing.T) {
	t.Parallel()
	errBusy := errors.New("busy")
	progress := make(chan struct{}, 1)
	calls := 0
	send := func(b []byte) error {
		calls++
		if calls <= 3 {
			progress <- struct{}{} // the bridge makes progress while we wait
			return errBusy
		}
		return nil
	}
	r := RetryReceiver(context.Background(), send, func(err error) bool { return errors.Is(err, errBusy) }, progress)
	if err := r.ReceiveTLP([]byte{1}); err != nil || calls != 4 {
		t.Fatalf("err %v after %d calls", err, calls)
	}
	// Other errors come back at once.
	bad := errors.New("not up")
	r = RetryReceiver(context.Background(), func([]byte) error { return bad }, func(err error) bool { return errors.Is(err, errBusy) }, nil)
	if err := r.ReceiveTLP([]byte{1}); !errors.Is(err, bad) {
		t.Fatalf("err %v", err)
	}
	// A cancelled context ends the wait.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r = RetryReceiver(ctx, func([]byte) error { return errBusy }, func(err error) bool { return errors.Is(err, errBusy) }, nil)
	if err := r.ReceiveTLP([]byte{1}); !errors.Is(err, errBusy) {
		t.Fatalf("err %v", err)
	}
}
