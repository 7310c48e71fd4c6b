package udp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/internal/waitfor"
)

// busyPair is pair over ListenBusyPoll sockets.
func busyPair(t testing.TB, local string) (a, b *Conn) {
	t.Helper()
	lo := netip.MustParseAddr(local)
	a, err := ListenBusyPoll(netip.AddrPortFrom(lo, 0), netip.AddrPort{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err = ListenBusyPoll(netip.AddrPortFrom(lo, 0), a.LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	a.SetPeer(b.LocalAddr())
	return a, b
}

// A ListenBusyPoll socket carries frames both ways by every path (Send,
// SendBatch, Recv, RecvBatch, TryRecvBatch after WaitReadable), ignores a
// stranger's datagram, on IPv4 and IPv6.
func TestBusyPollSocket(t *testing.T) {
	t.Parallel()
	for _, lo := range []string{"127.0.0.1", "::1"} {
		a, b := busyPair(t, lo)
		if !a.LocalAddr().Addr().IsLoopback() || a.LocalAddr().Port() == 0 {
			t.Fatalf("%s: bound to %v", lo, a.LocalAddr())
		}
		stranger, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(b.LocalAddr()))
		if err != nil {
			t.Fatal(err)
		}
		defer stranger.Close()
		if _, err := stranger.Write([]byte("not from the peer")); err != nil {
			t.Fatal(err)
		}
		if err := a.Send([]byte("frame 0")); err != nil {
			t.Fatal(err)
		}
		if n, err := a.SendBatch([][]byte{[]byte("frame 1"), []byte("frame 2")}); n != 2 || err != nil {
			t.Fatalf("%s: SendBatch %d, %v", lo, n, err)
		}
		buf := make([]byte, 64)
		var n int
		err = within(t, b, lo+": frame 0 from the peer", func() (err error) { n, err = b.Recv(buf); return err })
		if err != nil || string(buf[:n]) != "frame 0" {
			t.Fatalf("%s: Recv %q, %v; want frame 0", lo, buf[:n], err)
		}
		bs, sizes := bufs(8, 64)
		got := []string{}
		for len(got) < 2 {
			if err := within(t, b, fmt.Sprintf("%s: the rest of the 2 frames SendBatch sent (%d came)", lo, len(got)), b.WaitReadable); err != nil {
				t.Fatal(err)
			}
			k, err := b.TryRecvBatch(bs, sizes)
			if err != nil {
				t.Fatal(err)
			}
			for i := range k {
				got = append(got, string(bs[i][:sizes[i]]))
			}
		}
		if fmt.Sprint(got) != "[frame 1 frame 2]" || b.Foreign.Load() != 1 {
			t.Fatalf("%s: got %q, %d foreign; want [frame 1 frame 2], 1", lo, got, b.Foreign.Load())
		}
		if err := b.Send([]byte("back")); err != nil {
			t.Fatal(err)
		}
		var k int
		err = within(t, a, lo+": the frame sent back", func() (err error) { k, err = a.RecvBatch(bs, sizes); return err })
		if err != nil || k != 1 || string(bs[0][:sizes[0]]) != "back" {
			t.Fatalf("%s: RecvBatch %d, %v", lo, k, err)
		}
	}
}

// Close ends a wait in WaitReadable and in RecvBatch with net.ErrClosed,
// and every call after it fails so.
func TestBusyPollSocketClose(t *testing.T) {
	t.Parallel()
	a, b := busyPair(t, "127.0.0.1")
	errs := make(chan error, 2)
	go func() { errs <- b.WaitReadable() }()
	go func() { bs, sizes := bufs(2, 64); _, err := a.RecvBatch(bs, sizes); errs <- err }()
	a.Close()
	b.Close()
	for range 2 {
		if err := waitfor.Receive(t, errs, "WaitReadable and RecvBatch returning once their sockets were closed"); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("wait ended with %v, want net.ErrClosed", err)
		}
	}
	if err := a.Send([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Send after Close: %v", err)
	}
	bs, sizes := bufs(2, 64)
	if _, err := b.TryRecvBatch(bs, sizes); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("TryRecvBatch after Close: %v", err)
	}
}

// The point of ListenBusyPoll: its socket is in no epoll set of the
// process (the runtime's poller would wake a thread for each datagram),
// where a Listen socket is.
func TestBusyPollSocketNotInPoller(t *testing.T) {
	t.Parallel()
	raw, _ := busyPair(t, "127.0.0.1")
	polled, _ := pair(t, "127.0.0.1")
	var rawFD, polledFD int
	_ = raw.sys.rc.Control(func(fd uintptr) { rawFD = int(fd) })
	_ = polled.sys.rc.Control(func(fd uintptr) { polledFD = int(fd) })
	watched := epollTargets(t)
	if !watched[polledFD] {
		t.Fatalf("the Listen socket (fd %d) is in no epoll set: cannot tell (watched: %v)", polledFD, watched)
	}
	if watched[rawFD] {
		t.Fatalf("the ListenBusyPoll socket (fd %d) is in an epoll set", rawFD)
	}
}

// epollTargets returns the descriptors that the process's epoll
// instances watch, from /proc/self/fdinfo.
func epollTargets(t *testing.T) map[int]bool {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]bool{}
	for _, e := range fds {
		if l, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); l != "anon_inode:[eventpoll]" {
			continue
		}
		info, err := os.ReadFile(filepath.Join("/proc/self/fdinfo", e.Name()))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(info), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "tfd:" {
				if n, err := strconv.Atoi(f[1]); err == nil {
					out[n] = true
				}
			}
		}
	}
	return out
}

// BenchmarkSendOne: one 64-byte frame (an MMIO read's request or
// completion) sent by Send and taken by TryRecvBatch, over sockets of
// Listen and of ListenBusyPoll; 0 allocs/op.
func BenchmarkSendOne(b *testing.B) {
	for _, k := range []struct {
		name string
		pair func(testing.TB, string) (*Conn, *Conn)
	}{{"listen", pair}, {"busypoll", busyPair}} {
		b.Run(k.name, func(b *testing.B) {
			a, c := k.pair(b, "127.0.0.1")
			frame := make([]byte, 64)
			bs, sizes := bufs(8, 2048)
			b.ReportAllocs()
			for b.Loop() {
				if err := c.Send(frame); err != nil {
					b.Fatal(err)
				}
				for {
					n, err := a.TryRecvBatch(bs, sizes)
					if err != nil {
						b.Fatal(err)
					}
					if n > 0 {
						break
					}
				}
			}
		})
	}
}
