package udp

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/internal/waitfor"
)

// offloadFrames is a batch with runs of equal frames (each run one
// segmented message, the shorter frame after a run ending it), frames
// larger than the run before them, and a lone frame.
func offloadFrames() [][]byte {
	var fs [][]byte
	for i, n := range []int{1000, 1000, 1000, 1000, 1000, 700, 1000, 1000, 1000, 1200, 1200, 50, 3000, 3000, 3000, 3000, 3000, 3000, 3000, 3000, 3000, 3000, 3000, 3000, 3000, 3000, 3000, 3000, 3000, 3000, 3000, 3000, 3000, 3000, 9} {
		f := make([]byte, n)
		for j := range f {
			f[j] = byte(i*7 + j)
		}
		fs = append(fs, f)
	}
	return fs
}

// recvFrames takes n frames with TryRecvBatch into k buffers of size
// bytes; a frame that never comes fails the test once nothing moves.
func recvFrames(t *testing.T, c *Conn, n, k, size int) [][]byte {
	t.Helper()
	bs, sizes := bufs(k, size)
	var got [][]byte
	waitfor.Progress(t, "frames", func() (bool, uint64) {
		m, err := c.TryRecvBatch(bs, sizes)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < m; i++ {
			got = append(got, append([]byte(nil), bs[i][:sizes[i]]...))
		}
		return len(got) >= n, uint64(len(got))
	})
	return got
}

func sameFrames(t *testing.T, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d frames, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("frame %d: %d bytes %x..., want %d bytes %x...", i, len(got[i]), got[i][:min(8, len(got[i]))], len(want[i]), want[i][:min(8, len(want[i]))])
		}
	}
}

// With UDP GSO (this kernel has it), runs of equal frames go out
// segmented and every frame arrives whole and in order, over IPv4 and a
// dual-stack IPv6 socket.
func TestOffloadRoundTrip(t *testing.T) {
	for _, lo := range []string{"127.0.0.1", "::1"} {
		t.Run(lo, func(t *testing.T) {
			a, b := pair(t, lo)
			if !b.sys.gso {
				t.Fatal("UDP_SEGMENT not offered on this kernel")
			}
			want := offloadFrames()
			if n, err := b.SendBatch(want); err != nil || n != len(want) {
				t.Fatalf("SendBatch: %d of %d, %v", n, len(want), err)
			}
			sameFrames(t, recvFrames(t, a, len(want), MaxBatch, 4000), want)
			// Runs of 5, 3 (ended by a shorter frame), 2 and 22 (two
			// messages: 66,000 bytes are above a datagram's limit).
			if want := uint64(5 + 1 + 3 + 1 + 2 + 1 + 22); b.sys.segmented != want {
				t.Fatalf("%d frames went out segmented, want %d", b.sys.segmented, want)
			}
		})
	}
}

// A kernel that refuses a segmented send (here: UDP checksums off, which
// UDP GSO needs) makes the socket send every frame on its own from then
// on, and the batch still arrives whole and in order.
func TestOffloadSendRefused(t *testing.T) {
	a, b := pair(t, "127.0.0.1")
	if err := b.sys.rc.Control(func(fd uintptr) {
		if err := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_NO_CHECK, 1); err != nil {
			t.Fatal(err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	want := offloadFrames()
	if n, err := b.SendBatch(want); err != nil || n != len(want) {
		t.Fatalf("SendBatch: %d of %d, %v", n, len(want), err)
	}
	if b.sys.gso || b.sys.segmented != 0 {
		t.Fatalf("after a refused segmented send: gso %v, %d frames segmented", b.sys.gso, b.sys.segmented)
	}
	sameFrames(t, recvFrames(t, a, len(want), MaxBatch, 4000), want)
}

// A kernel that does not know UDP_SEGMENT (before Linux 4.18) leaves the
// socket plain: no segmented send, every frame through.
func TestOffloadOptionRefused(t *testing.T) {
	offloadRefuse = func(opt int) bool { return opt == unix.UDP_SEGMENT }
	defer func() { offloadRefuse = nil }()
	a, b := pair(t, "127.0.0.1")
	if b.sys.gso {
		t.Fatal("UDP_SEGMENT refused, but the socket segments")
	}
	want := offloadFrames()
	if n, err := b.SendBatch(want); err != nil || n != len(want) {
		t.Fatalf("SendBatch: %d of %d, %v", n, len(want), err)
	}
	sameFrames(t, recvFrames(t, a, len(want), MaxBatch, 4000), want)
	if b.sys.segmented != 0 {
		t.Fatalf("option refused: %d frames segmented", b.sys.segmented)
	}
}

// NoOffload keeps segmentation off: the raw baseline's plain sockets.
func TestNoOffload(t *testing.T) {
	a, b := pair(t, "127.0.0.1")
	a.NoOffload()
	b.NoOffload()
	want := offloadFrames()
	if n, err := b.SendBatch(want); err != nil || n != len(want) {
		t.Fatalf("SendBatch: %d of %d, %v", n, len(want), err)
	}
	sameFrames(t, recvFrames(t, a, len(want), MaxBatch, 4000), want)
	if b.sys.segmented != 0 {
		t.Fatalf("NoOffload: %d frames segmented", b.sys.segmented)
	}
}

// recvSegments takes n frames with TryRecvSegments, cutting each message
// at its segment size, and returns them and how many messages held more
// than one frame.
func recvSegments(t *testing.T, c *Conn, n int) (got [][]byte, coalesced int) {
	t.Helper()
	bs, sizes := bufs(MaxBatch, 65536)
	segs := make([]int, MaxBatch)
	waitfor.Progress(t, "frames", func() (bool, uint64) {
		m, err := c.TryRecvSegments(bs, sizes, segs)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < m; i++ {
			b := bs[i][:sizes[i]]
			if segs[i] < len(b) {
				coalesced++
			}
			for len(b) > segs[i] {
				got = append(got, append([]byte(nil), b[:segs[i]]...))
				b = b[segs[i]:]
			}
			got = append(got, append([]byte(nil), b...))
		}
		return len(got) >= n, uint64(len(got))
	})
	return got, coalesced
}

// With UDP GRO on the receiver, a segmented send arrives as one message
// per run (the kernel does not cut it on loopback), and cutting each at
// the segment size TryRecvSegments reports gives every frame whole and in
// order, over IPv4 and IPv6; frames from another source are still
// dropped.
func TestGRORoundTrip(t *testing.T) {
	for _, lo := range []string{"127.0.0.1", "::1"} {
		t.Run(lo, func(t *testing.T) {
			a, b := pair(t, lo)
			if !a.EnableGRO() {
				t.Fatal("UDP_GRO not offered on this kernel")
			}
			stranger, err := Listen(netip.AddrPortFrom(netip.MustParseAddr(lo), 0), a.LocalAddr())
			if err != nil {
				t.Fatal(err)
			}
			defer stranger.Close()
			want := offloadFrames()
			if _, err := stranger.SendBatch(want[:5]); err != nil {
				t.Fatal(err)
			}
			if n, err := b.SendBatch(want); err != nil || n != len(want) {
				t.Fatalf("SendBatch: %d of %d, %v", n, len(want), err)
			}
			got, coalesced := recvSegments(t, a, len(want))
			sameFrames(t, got, want)
			// The runs of 5, 3+1, 2+1 and 22 (two messages) of
			// TestOffloadRoundTrip, each one message.
			if coalesced != 5 || a.Coalesced() != 5 {
				t.Errorf("%d messages held more than one frame (counted %d), want 5", coalesced, a.Coalesced())
			}
			if a.Foreign.Load() != 1 {
				t.Errorf("foreign messages dropped: %d, want 1", a.Foreign.Load())
			}
		})
	}
}

// Without GRO (refused, or a plain socket) TryRecvSegments reports a
// frame per message.
func TestGRORefused(t *testing.T) {
	offloadRefuse = func(opt int) bool { return opt == unix.UDP_GRO }
	defer func() { offloadRefuse = nil }()
	a, b := pair(t, "127.0.0.1")
	if a.EnableGRO() {
		t.Fatal("UDP_GRO refused, but EnableGRO reports it on")
	}
	want := offloadFrames()
	if n, err := b.SendBatch(want); err != nil || n != len(want) {
		t.Fatalf("SendBatch: %d of %d, %v", n, len(want), err)
	}
	got, coalesced := recvSegments(t, a, len(want))
	sameFrames(t, got, want)
	if coalesced != 0 {
		t.Fatalf("%d coalesced messages without GRO", coalesced)
	}
}

// NoOffload turns GRO off again: the raw baseline's plain receiver.
func TestNoOffloadGRO(t *testing.T) {
	a, b := pair(t, "127.0.0.1")
	if !a.EnableGRO() {
		t.Fatal("UDP_GRO not offered on this kernel")
	}
	a.NoOffload()
	want := offloadFrames()
	if n, err := b.SendBatch(want); err != nil || n != len(want) {
		t.Fatalf("SendBatch: %d of %d, %v", n, len(want), err)
	}
	sameFrames(t, recvFrames(t, a, len(want), MaxBatch, 4000), want)
}

// The segmented path allocates nothing.
func TestOffloadAllocs(t *testing.T) {
	a, b := pair(t, "127.0.0.1")
	frames := make([][]byte, 24)
	for i := range frames {
		frames[i] = make([]byte, 2000)
	}
	bs, sizes := bufs(MaxBatch, 4000)
	round := func() {
		if _, err := b.SendBatch(frames); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < len(frames); {
			bound(t, a)
			n, err := a.RecvBatch(bs, sizes) // blocks only while none is queued
			if err != nil {
				expired(t, err, "a frame of the batch sent")
				t.Fatal(err)
			}
			got += n
		}
	}
	round()
	if allocs := testing.AllocsPerRun(50, round); allocs != 0 {
		t.Fatalf("%v allocations per batch", allocs)
	}
	if b.sys.segmented == 0 {
		t.Fatal("nothing went out segmented")
	}
	// And with GRO, a coalesced receive.
	if !a.EnableGRO() {
		t.Fatal("UDP_GRO not offered on this kernel")
	}
	rb, rsizes := bufs(MaxBatch, 65536)
	segs := make([]int, MaxBatch)
	round = func() {
		if _, err := b.SendBatch(frames); err != nil {
			t.Fatal(err)
		}
		for got, moved := 0, time.Now(); got < len(frames); {
			n, err := a.TryRecvSegments(rb, rsizes, segs)
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				moved = time.Now()
			} else if time.Since(moved) > waitfor.Stall {
				t.Fatalf("GRO: frame %d of the %d sent: nothing came within %v", got, len(frames), waitfor.Stall)
			}
			for i := range n {
				got += (rsizes[i] + segs[i] - 1) / segs[i]
			}
		}
	}
	round()
	if allocs := testing.AllocsPerRun(50, round); allocs != 0 {
		t.Fatalf("GRO: %v allocations per batch", allocs)
	}
}

// cpuTime is the process's user and system time: on a shared machine the
// CPU a batch costs says more than the wall time it took.
func cpuTime() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A segmented batch of 9000-byte frames against the same frames one
// datagram each; cpu-ns/op is the process's CPU time per batch.
func BenchmarkOffload(b *testing.B) {
	for _, k := range []struct {
		name string
		gso  bool
		gro  bool
	}{{"plain", false, false}, {"gso", true, false}, {"gso+gro", true, true}} {
		b.Run(k.name, func(b *testing.B) {
			a, c := pair(b, "127.0.0.1")
			if !k.gso {
				c.NoOffload()
			}
			if k.gro && !a.EnableGRO() {
				b.Skip("no UDP_GRO")
			}
			frames, _ := bufs(MaxBatch, 9000)
			rb, sizes := bufs(MaxBatch, 65536)
			segs := make([]int, MaxBatch)
			b.ReportAllocs()
			b.SetBytes(int64(len(frames) * 9000))
			c0 := cpuTime()
			for b.Loop() {
				if _, err := c.SendBatch(frames); err != nil {
					b.Fatal(err)
				}
				for got := 0; got < len(frames); {
					if k.gro {
						n, err := a.TryRecvSegments(rb, sizes, segs)
						if err != nil {
							b.Fatal(err)
						}
						for i := range n {
							got += (sizes[i] + segs[i] - 1) / segs[i]
						}
						continue
					}
					n, err := a.RecvBatch(rb, sizes)
					if err != nil {
						b.Fatal(err)
					}
					got += n
				}
			}
			b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
		})
	}
}
