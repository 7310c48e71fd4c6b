package udp

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/waitfor"
)

// TryRecvBatch returns at once with nothing queued; WaitReadable waits
// for a datagram without taking it, and TryRecvBatch then takes what is
// queued, in order, with a foreign sender's datagram left out.
func TestTryRecvAndWaitReadable(t *testing.T) {
	t.Parallel()
	a, b := pair(t, "127.0.0.1")
	bs, sizes := bufs(8, 2048)
	t0 := time.Now()
	if k, err := b.TryRecvBatch(bs, sizes); k != 0 || err != nil {
		t.Fatalf("empty socket: TryRecvBatch %d, %v", k, err)
	}
	if d := time.Since(t0); d > time.Second {
		t.Fatalf("TryRecvBatch on an empty socket took %v", d)
	}
	stranger, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(b.LocalAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	if _, err := stranger.Write([]byte("not from the peer")); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := a.Send(fmt.Appendf(nil, "frame %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for len(got) < 3 {
		if err := within(t, b, fmt.Sprintf("the rest of the peer's 3 frames (%d came)", len(got)), b.WaitReadable); err != nil {
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
	for i, g := range got {
		if want := fmt.Sprintf("frame %d", i); g != want {
			t.Fatalf("frame %d: %q, want %q", i, g, want)
		}
	}
	if b.Foreign.Load() != 1 {
		t.Fatalf("foreign datagrams counted %d, want 1", b.Foreign.Load())
	}
	if k, err := b.TryRecvBatch(bs, sizes[:2]); err == nil {
		t.Fatalf("8 buffers, 2 sizes: took %d, no error", k)
	}
}

// WaitReadable ends when the socket is closed, with net.ErrClosed; a
// TryRecvBatch after Close fails the same way.
func TestWaitReadableClosed(t *testing.T) {
	t.Parallel()
	_, b := pair(t, "127.0.0.1")
	errc := make(chan error, 1)
	go func() { errc <- b.WaitReadable() }()
	b.Close()
	if err := waitfor.Receive(t, errc, "WaitReadable returning once the socket was closed"); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("WaitReadable after Close: %v, want net.ErrClosed", err)
	}
	bs, sizes := bufs(1, 64)
	if _, err := b.TryRecvBatch(bs, sizes); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("TryRecvBatch after Close: %v, want net.ErrClosed", err)
	}
}

// A poll that finds nothing allocates nothing; neither does one that takes
// a frame.
func TestTryRecvBatchAllocs(t *testing.T) {
	a, b := pair(t, "127.0.0.1")
	bs, sizes := bufs(8, 2048)
	frame := []byte("frame")
	if n := testing.AllocsPerRun(200, func() {
		if _, err := b.TryRecvBatch(bs, sizes); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("empty poll: %v allocations", n)
	}
	if n := testing.AllocsPerRun(200, func() {
		if err := a.Send(frame); err != nil {
			t.Fatal(err)
		}
		bound(t, b)
		if err := b.WaitReadable(); err != nil {
			expired(t, err, "the frame sent")
			t.Fatal(err)
		}
		if k, err := b.TryRecvBatch(bs, sizes); k != 1 || err != nil {
			t.Fatalf("took %d, %v", k, err)
		}
	}); n != 0 {
		t.Fatalf("poll with a frame: %v allocations", n)
	}
}

func BenchmarkTryRecvBatchEmpty(b *testing.B) {
	_, c := pair(b, "127.0.0.1")
	bs, sizes := bufs(8, 2048)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.TryRecvBatch(bs, sizes); err != nil {
			b.Fatal(err)
		}
	}
}
