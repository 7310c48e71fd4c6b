package udp

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"

	"github.com/dxpu/dxpu/internal/waitfor"
)

func pair(t testing.TB, local string) (a, b *Conn) {
	t.Helper()
	lo := netip.MustParseAddr(local)
	a, err := Listen(netip.AddrPortFrom(lo, 0), netip.AddrPort{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err = Listen(netip.AddrPortFrom(lo, 0), a.LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	a.SetPeer(b.LocalAddr())
	return a, b
}

func bufs(n, size int) ([][]byte, []int) {
	bs := make([][]byte, n)
	for i := range bs {
		bs[i] = make([]byte, size)
	}
	return bs, make([]int, n)
}

// recvAll collects n frames with RecvBatch.
func recvAll(t *testing.T, c *Conn, n, size int) [][]byte {
	t.Helper()
	bs, sizes := bufs(MaxBatch, size)
	var got [][]byte
	for len(got) < n {
		var k int
		err := within(t, c, fmt.Sprintf("the rest of the peer's %d frames (%d came)", n, len(got)), func() (err error) {
			k, err = c.RecvBatch(bs, sizes)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 || k > len(bs) {
			t.Fatalf("RecvBatch took %d frames", k)
		}
		for i := 0; i < k; i++ {
			got = append(got, append([]byte(nil), bs[i][:sizes[i]]...))
		}
	}
	return got
}

// A batch longer than MaxBatch goes out whole and in order, and comes in
// whole and in order, over IPv4 and over a dual-stack IPv6 socket.
func TestBatchRoundTrip(t *testing.T) {
	t.Parallel()
	for _, local := range []string{"127.0.0.1", "::1"} {
		t.Run(local, func(t *testing.T) {
			t.Parallel()
			a, b := pair(t, local)
			var frames [][]byte
			for i := 0; i < MaxBatch+37; i++ {
				frames = append(frames, []byte(fmt.Sprintf("frame %03d %s", i, bytes.Repeat([]byte{'x'}, i))))
			}
			n, err := b.SendBatch(frames)
			if err != nil || n != len(frames) {
				t.Fatalf("SendBatch: %d of %d, %v", n, len(frames), err)
			}
			got := recvAll(t, a, len(frames), 2048)
			for i := range frames {
				if !bytes.Equal(got[i], frames[i]) {
					t.Fatalf("frame %d: got %q, want %q", i, got[i], frames[i])
				}
			}
			if a.Foreign.Load() != 0 {
				t.Fatalf("foreign %d", a.Foreign.Load())
			}
		})
	}
}

// RecvBatch drops datagrams from strangers out of the middle of a batch,
// keeps the peer's frames in order, and cuts a datagram to its buffer.
func TestBatchPeerFilter(t *testing.T) {
	t.Parallel()
	a, b := pair(t, "127.0.0.1")
	stranger, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	want := [][]byte{[]byte("one"), []byte("two"), []byte("three-is-longer-than-the-buffer")}
	if err := b.Send(want[0]); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := stranger.WriteToUDPAddrPort([]byte("not a dxpu frame"), a.LocalAddr()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.SendBatch(want[1:]); err != nil {
		t.Fatal(err)
	}
	got := recvAll(t, a, 3, 16)
	want[2] = want[2][:16]
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("frame %d: got %q, want %q", i, got[i], want[i])
		}
	}
	if a.Foreign.Load() != 3 {
		t.Fatalf("foreign %d, want 3", a.Foreign.Load())
	}
}

// Bad arguments get an error, and a closed socket reports net.ErrClosed.
func TestBatchErrors(t *testing.T) {
	t.Parallel()
	a, _ := pair(t, "127.0.0.1")
	// A check that fails to refuse them waits for a frame instead.
	if err := within(t, a, "the error for fewer sizes than buffers", func() error {
		_, err := a.RecvBatch(make([][]byte, 2), make([]int, 1))
		return err
	}); err == nil {
		t.Fatal("fewer sizes than buffers: no error")
	}
	if err := within(t, a, "the error for no buffers", func() error { _, err := a.RecvBatch(nil, nil); return err }); err == nil {
		t.Fatal("no buffers: no error")
	}
	unset, err := Listen(netip.MustParseAddrPort("127.0.0.1:0"), netip.AddrPort{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := unset.SendBatch([][]byte{[]byte("x")}); err == nil || n != 0 {
		t.Fatalf("send without a peer: %d, %v", n, err)
	}
	unset.Close()
	a.Close()
	bs, sizes := bufs(1, 10)
	closedErr := make(chan error, 1)
	go func() { _, err := a.RecvBatch(bs, sizes); closedErr <- err }()
	if err := waitfor.Receive(t, closedErr, "the error of a receive on a closed socket"); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("receive on a closed socket: %v", err)
	}
}

func isClosed(err error) bool {
	return err != nil && bytes.Contains([]byte(err.Error()), []byte("closed"))
}

// One sendmmsg and one recvmmsg per batch of 32 frames of 1 KiB, and no
// allocation.
func BenchmarkBatch(b *testing.B) {
	for _, size := range []int{32} {
		b.Run(fmt.Sprintf("batch%d", size), func(b *testing.B) {
			a, c := pair(b, "127.0.0.1")
			frames, _ := bufs(size, 1024)
			rb, sizes := bufs(MaxBatch, 2048)
			b.ReportAllocs()
			b.SetBytes(int64(size * 1024))
			for b.Loop() {
				if _, err := c.SendBatch(frames); err != nil {
					b.Fatal(err)
				}
				for got := 0; got < size; {
					n, err := a.RecvBatch(rb, sizes)
					if err != nil {
						b.Fatal(err)
					}
					got += n
				}
			}
		})
	}
	b.Run("single", func(b *testing.B) {
		a, c := pair(b, "127.0.0.1")
		frame, buf := make([]byte, 1024), make([]byte, 2048)
		b.ReportAllocs()
		b.SetBytes(1024)
		for b.Loop() {
			if err := c.Send(frame); err != nil {
				b.Fatal(err)
			}
			if _, err := a.Recv(buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}
