package udp

import (
	"bytes"
	"net"
	"net/netip"
	"testing"
	"time"
)

// Frames from the peer come through; datagrams from anyone else are
// counted and skipped.
func TestPeerFilter(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	a, err := Listen(netip.AddrPortFrom(lo, 0), netip.AddrPort{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Listen(netip.AddrPortFrom(lo, 0), a.LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a.SetPeer(b.LocalAddr())
	stranger, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(lo, 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	if _, err := stranger.WriteToUDPAddrPort([]byte("not a dxpu frame"), a.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // let the stranger's datagram queue first
	if err := b.Send([]byte("frame")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	n, err := a.Recv(buf)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf[:n], []byte("frame")) || a.Foreign != 1 {
		t.Fatalf("got %q, foreign %d", buf[:n], a.Foreign)
	}
}
