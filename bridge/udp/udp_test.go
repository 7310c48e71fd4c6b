package udp

import (
	"bytes"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// waitReadable waits until c has a datagram queued, without taking it.
func waitReadable(t *testing.T, c *Conn) {
	t.Helper()
	rc, err := c.c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	cerr := rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			// One event to wait for: a long bound, not a total for work.
			if n, err = unix.Poll(fds, int((20 * time.Second).Milliseconds())); err != unix.EINTR {
				return
			}
		}
	})
	if cerr != nil || err != nil || n != 1 {
		t.Fatalf("waiting for a datagram on %v: ready %d, %v, %v", c.LocalAddr(), n, cerr, err)
	}
}

// Frames from the peer come through; datagrams from anyone else are
// counted and skipped.
func TestPeerFilter(t *testing.T) {
	t.Parallel()
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
	waitReadable(t, a) // the stranger's datagram is queued before the peer's frame
	if err := b.Send([]byte("frame")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	var n int
	err = within(t, a, "the peer's frame behind the stranger's datagram", func() (err error) { n, err = a.Recv(buf); return err })
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf[:n], []byte("frame")) || a.Foreign.Load() != 1 {
		t.Fatalf("got %q, foreign %d", buf[:n], a.Foreign.Load())
	}
}
