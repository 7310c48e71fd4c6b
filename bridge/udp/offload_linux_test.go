package udp

import (
	"bytes"
	"fmt"
	"testing"

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

// With UDP GSO and GRO (this kernel has both), runs of equal frames go out
// segmented and come in coalesced, and every frame arrives whole and in
// order: into fewer buffers than frames (the rest wait in the stash),
// into buffers too small for a coalesced message, and through Recv.
func TestOffloadRoundTrip(t *testing.T) {
	for _, lo := range []string{"127.0.0.1", "::1"} {
		t.Run(lo, func(t *testing.T) {
			a, b := pair(t, lo)
			if !b.sys.gso {
				t.Fatal("UDP_SEGMENT not offered on this kernel")
			}
			want := offloadFrames()
			// The first receive with 64 KiB buffers turns GRO on; the
			// batch is sent once it is on.
			if n, err := a.TryRecvBatch(make([][]byte, 1), make([]int, 1)); err != nil || n != 0 {
				t.Fatalf("TryRecvBatch on an empty socket: %d, %v", n, err)
			}
			if _, err := a.TryRecvBatch([][]byte{make([]byte, groMin)}, make([]int, 1)); err != nil || !a.sys.gro {
				t.Fatalf("GRO not on after a receive with %d-byte buffers (%v)", groMin, err)
			}
			send := func() {
				t.Helper()
				if n, err := b.SendBatch(want); err != nil || n != len(want) {
					t.Fatalf("SendBatch: %d of %d, %v", n, len(want), err)
				}
			}
			send()
			sameFrames(t, recvFrames(t, a, len(want), 4, groMin), want)
			if b.sys.segmented == 0 || a.sys.coalesced == 0 {
				t.Fatalf("%d frames went out segmented and %d came in coalesced, want some of each", b.sys.segmented, a.sys.coalesced)
			}
			// Several coalesced messages in one receive, each cut in
			// place into the buffers after it.
			send()
			sameFrames(t, recvFrames(t, a, len(want), MaxBatch, groMin), want)
			send()
			sameFrames(t, recvFrames(t, a, len(want), MaxBatch, 4000), want)
			send()
			var got [][]byte
			buf := make([]byte, 4000)
			for len(got) < len(want) {
				n, err := a.Recv(buf)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, append([]byte(nil), buf[:n]...))
			}
			sameFrames(t, got, want)
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
	sameFrames(t, recvFrames(t, a, len(want), 8, groMin), want)
}

// A kernel that knows neither option (before Linux 4.18 and 5.0) leaves
// the socket plain: no segmented send, no coalesced receive, every frame
// through.
func TestOffloadOptionsRefused(t *testing.T) {
	offloadRefuse = func(opt int) bool { return opt == unix.UDP_SEGMENT || opt == unix.UDP_GRO }
	defer func() { offloadRefuse = nil }()
	a, b := pair(t, "127.0.0.1")
	if b.sys.gso {
		t.Fatal("UDP_SEGMENT refused, but the socket segments")
	}
	want := offloadFrames()
	if n, err := b.SendBatch(want); err != nil || n != len(want) {
		t.Fatalf("SendBatch: %d of %d, %v", n, len(want), err)
	}
	sameFrames(t, recvFrames(t, a, len(want), 8, groMin), want)
	if a.sys.gro || a.sys.coalesced != 0 || b.sys.segmented != 0 {
		t.Fatalf("options refused: gro %v, %d coalesced, %d segmented", a.sys.gro, a.sys.coalesced, b.sys.segmented)
	}
}

// NoOffload keeps both options off: the raw baseline's plain sockets.
func TestNoOffload(t *testing.T) {
	a, b := pair(t, "127.0.0.1")
	a.NoOffload()
	b.NoOffload()
	want := offloadFrames()
	if n, err := b.SendBatch(want); err != nil || n != len(want) {
		t.Fatalf("SendBatch: %d of %d, %v", n, len(want), err)
	}
	sameFrames(t, recvFrames(t, a, len(want), 8, groMin), want)
	if a.sys.gro || a.sys.coalesced != 0 || b.sys.segmented != 0 {
		t.Fatalf("NoOffload: gro %v, %d coalesced, %d segmented", a.sys.gro, a.sys.coalesced, b.sys.segmented)
	}
}

// The segmented and coalesced path allocates nothing once warm.
func TestOffloadAllocs(t *testing.T) {
	a, b := pair(t, "127.0.0.1")
	frames := make([][]byte, 24)
	for i := range frames {
		frames[i] = make([]byte, 2000)
	}
	bs, sizes := bufs(8, groMin)
	round := func() {
		if _, err := b.SendBatch(frames); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < len(frames); {
			n, err := a.RecvBatch(bs, sizes) // blocks only while none is queued
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
	}
	round()
	if allocs := testing.AllocsPerRun(50, round); allocs != 0 {
		t.Fatalf("%v allocations per batch", allocs)
	}
	if a.sys.coalesced == 0 {
		t.Fatal("nothing came in coalesced")
	}
}

// A segmented batch of 9000-byte frames against the same frames one
// datagram each.
func BenchmarkOffload(b *testing.B) {
	for _, off := range []bool{false, true} {
		b.Run(fmt.Sprintf("plain=%v", off), func(b *testing.B) {
			a, c := pair(b, "127.0.0.1")
			if off {
				a.NoOffload()
				c.NoOffload()
			}
			frames, _ := bufs(MaxBatch, 9000)
			rb, sizes := bufs(8, groMin)
			b.ReportAllocs()
			b.SetBytes(int64(len(frames) * 9000))
			for b.Loop() {
				if _, err := c.SendBatch(frames); err != nil {
					b.Fatal(err)
				}
				for got := 0; got < len(frames); {
					n, err := a.RecvBatch(rb, sizes)
					if err != nil {
						b.Fatal(err)
					}
					got += n
				}
			}
		})
	}
}
