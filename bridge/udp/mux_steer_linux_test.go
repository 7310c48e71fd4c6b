package udp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/tlp/encap"
)

// steeredMux is a mux with steering and Run going; it skips where the
// kernel refuses steering.
func steeredMux(t *testing.T, local string) *Mux {
	t.Helper()
	m, err := ListenMux(netip.MustParseAddrPort(local))
	if err != nil {
		t.Fatal(err)
	}
	if !m.Steered() {
		m.Close()
		t.Skip("the kernel refuses SO_REUSEPORT steering")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() { cancel(); m.Close(); <-done })
	return m
}

// recvSteered takes one frame of a steered pair (waiting for it).
func recvSteered(t *testing.T, pc *MuxConn, what string) []byte {
	t.Helper()
	ch := make(chan []byte, 1)
	go func() {
		buf := make([]byte, MuxMaxFrame)
		n, err := pc.Recv(buf)
		if err != nil {
			ch <- nil
			return
		}
		ch <- buf[:n]
	}()
	return waitfor.Receive(t, ch, what)
}

// With steering the kernel hands each pair's frames to the pair's own
// socket, in order, and none of them passes through the mux's goroutine;
// a frame of a pair the mux does not hold still reaches the mux's socket
// and is counted there. A released pair's frames are then unknown, and
// its socket serves the next pair (no new socket bound) with nothing of
// the last pair's left in it.
func TestMuxSteersPairs(t *testing.T) {
	m := steeredMux(t, "127.0.0.1:0")
	src, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(m.LocalAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	a, _ := m.Open(1, m.LocalAddr())
	b, _ := m.Open(2, m.LocalAddr())
	if a.sock == nil || b.sock == nil {
		t.Fatal("pairs opened without sockets of their own")
	}
	send := func(id uint32, seq byte) {
		t.Helper()
		if _, err := src.Write(muxFrame(id, seq)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		send(1, byte(i))
		send(2, byte(100+i))
	}
	send(3, 0)
	for i := range 10 {
		for _, c := range []struct {
			pc   *MuxConn
			want byte
		}{{a, byte(i)}, {b, byte(100 + i)}} {
			f := recvSteered(t, c.pc, fmt.Sprintf("pair %d frame %d", c.pc.id, i))
			if f == nil || encap.Header(f).PairID() != c.pc.id || f[encap.HeaderLen] != c.want {
				t.Fatalf("pair %d frame %d: % x", c.pc.id, i, f)
			}
		}
	}
	waitfor.Until(t, "pair 3's frame counted unknown", func() bool { return m.Unknown.Load() == 1 })
	if c := m.recvCalls.Load(); c != 1 {
		t.Errorf("the mux's goroutine took %d receive calls, want 1 (pair 3's frame only)", c)
	}

	send(1, 50) // queued on a's socket: the next pair must not see it
	waitfor.Until(t, "pair 1's last frame queued", func() bool {
		var st [1]byte
		n, _, _, _, _ := syscallPeek(a.sock, st[:])
		return n > 0
	})
	a.Close()
	if _, err := a.TryRecvBatch([][]byte{make([]byte, 64)}, []int{0}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("TryRecvBatch after Close: %v, want net.ErrClosed", err)
	}
	send(1, 51)
	waitfor.Until(t, "a released pair's frame counted unknown", func() bool { return m.Unknown.Load() == 2 })
	c, _ := m.Open(5, m.LocalAddr())
	if c.sock != a.sock || len(m.steer.socks) != 2 {
		t.Fatalf("pair 5 got a new socket (%d in the group), not pair 1's", len(m.steer.socks)+1)
	}
	send(5, 7)
	if f := recvSteered(t, c, "pair 5's frame"); f == nil || encap.Header(f).PairID() != 5 || f[encap.HeaderLen] != 7 {
		t.Fatalf("pair 5 received % x, want its own frame (pair 1's left behind?)", f)
	}
}

// syscallPeek looks at c's queue without taking (MSG_PEEK|MSG_DONTWAIT).
func syscallPeek(c *Conn, b []byte) (n int, oobn int, flags int, from syscall.Sockaddr, err error) {
	rc, err := c.c.SyscallConn()
	if err != nil {
		return 0, 0, 0, nil, err
	}
	_ = rc.Control(func(fd uintptr) {
		n, oobn, flags, from, err = syscall.Recvmsg(int(fd), b, nil, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	})
	return
}

// A steered pair's runner waiting for frames (WaitReadable) is woken by
// Close with net.ErrClosed, and Close returns only after that wait has
// ended, so the socket is free for the next pair.
func TestMuxSteeredCloseEndsWait(t *testing.T) {
	m := steeredMux(t, "127.0.0.1:0")
	a, _ := m.Open(1, m.LocalAddr())
	woke := make(chan error, 1)
	go func() { woke <- a.WaitReadable() }()
	time.Sleep(20 * time.Millisecond) // let it wait (it passes either way)
	a.Close()
	if err := waitfor.Receive(t, woke, "the wait ended by Close"); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("WaitReadable: %v, want net.ErrClosed", err)
	}
}

// The steered mux's socket still refuses a port in use, as a plain bind
// does: a second agent on the port fails instead of joining its group.
func TestMuxPortInUseRefused(t *testing.T) {
	m := steeredMux(t, "127.0.0.1:0")
	_, err := ListenMux(m.LocalAddr())
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("a second mux on %v: %v, want EADDRINUSE", m.LocalAddr(), err)
	}
}

// Once Run has returned on its context, the port is free again, pair
// sockets included: an agent restarted on its port binds it (the pair
// sockets held the port when only the mux's own was closed).
func TestMuxPortFreeAfterRun(t *testing.T) {
	m, err := ListenMux(netip.MustParseAddrPort("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	if !m.Steered() {
		m.Close()
		t.Skip("the kernel refuses SO_REUSEPORT steering")
	}
	m.Open(1, m.LocalAddr())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	cancel()
	waitfor.Receive(t, done, "Run to return")
	again, err := ListenMux(m.LocalAddr())
	if err != nil {
		t.Fatalf("the port %v after Run returned: %v", m.LocalAddr(), err)
	}
	again.Close()
}

// A socket of this user with SO_REUSEPORT on the port (another program's
// group, or a second agent's) makes the steered mux's bind fail, as a
// plain bind does, instead of joining that group and taking its frames.
func TestMuxRefusesJoiningAGroup(t *testing.T) {
	other, err := listenReusePort(netip.MustParseAddrPort("127.0.0.1:0"), false)
	if err != nil {
		t.Skipf("SO_REUSEPORT: %v", err)
	}
	defer other.Close()
	at := other.LocalAddr().(*net.UDPAddr).AddrPort()
	m, err := ListenMux(at)
	if err == nil {
		m.Close()
		t.Fatalf("the mux bound %v, which a reuseport socket of another group holds", at)
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("a mux on %v: %v, want EADDRINUSE", at, err)
	}
}
