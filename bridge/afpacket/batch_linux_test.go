package afpacket

import (
	"bytes"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// The batched calls are what a runner uses: a Conn that lost one of them
// would fall back to a system call (and allocations) per frame, silently.
var (
	_ driver.BatchSender   = (*Conn)(nil)
	_ driver.BatchReceiver = (*Conn)(nil)
	_ driver.Poller        = (*Conn)(nil)
)

// testFrames returns n frames of different sizes, each starting with its
// index.
func testFrames(n int) [][]byte {
	frames := make([][]byte, n)
	for i := range frames {
		f := bytes.Repeat([]byte{byte(i)}, 60+i*37%1400)
		copy(f, fmt.Sprintf("frame %03d", i))
		frames[i] = f
	}
	return frames
}

func recvBufs(n int) ([][]byte, []int) {
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = make([]byte, 9000)
	}
	return bufs, make([]int, n)
}

// SendBatch's frames arrive whole and in order through RecvBatch, more
// than one system call's worth of them; frames from other sources in
// between are dropped, counted, and the peer's after them are moved up
// intact.
func TestBatchOverVeth(t *testing.T) {
	t.Parallel()
	a, b, raw := vethPairRaw(t)
	defer a.Close()
	defer b.Close()
	defer raw.Close()

	frames := testFrames(MaxBatch + 13)
	if n, err := b.SendBatch(frames); err != nil || n != len(frames) {
		t.Fatalf("SendBatch: %d of %d sent, %v", n, len(frames), err)
	}
	bufs, sizes := recvBufs(8)
	var got [][]byte
	for len(got) < len(frames) {
		n, err := recvBatch(t, a, fmt.Sprintf("the rest of the %d frames SendBatch sent (%d came)", len(frames), len(got)), bufs, sizes)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			got = append(got, append([]byte(nil), bufs[i][:sizes[i]]...))
		}
	}
	for i := range frames {
		// A frame shorter than Ethernet's minimum arrives padded.
		if len(got[i]) < len(frames[i]) || !bytes.Equal(got[i][:len(frames[i])], frames[i]) {
			t.Fatalf("frame %d: got %d bytes %q..., want %d bytes %q...", i, len(got[i]), got[i][:min(12, len(got[i]))], len(frames[i]), frames[i][:12])
		}
	}

	// Strangers first, the peer's frames behind them in the same batch.
	received := packetsSeen(t, a)
	stranger := net.HardwareAddr{0x02, 0x5e, 0, 0, 0x99, 1}
	for range 3 {
		if err := raw.send(stranger, []byte("from a stranger, padded to sixty bytes or so......")); err != nil {
			t.Fatal(err)
		}
	}
	peer := testFrames(4)
	if _, err := b.SendBatch(peer); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, "the strangers' frames and the peer's queued", func() bool {
		return received() >= 7
	})
	n, err := a.TryRecvBatch(bufs, sizes)
	if err != nil {
		t.Fatal(err)
	}
	if n != 4 || a.ForeignDropped() != 3 {
		t.Fatalf("TryRecvBatch took %d frames and dropped %d foreign: want the peer's 4 and 3 dropped", n, a.ForeignDropped())
	}
	for i := range n {
		if !bytes.HasPrefix(bufs[i][:sizes[i]], peer[i]) {
			t.Errorf("frame %d after the strangers: got %q..., want %q...", i, bufs[i][:12], peer[i][:12])
		}
	}
}

// packetsSeen returns a function reporting how many frames c's socket
// took (PACKET_STATISTICS) since packetsSeen was called.
func packetsSeen(t *testing.T, c *Conn) func() int {
	t.Helper()
	if _, err := c.c.Stats(); err != nil { // the kernel's counts restart at each read
		t.Fatal(err)
	}
	total := 0
	return func() int {
		st, err := c.c.Stats()
		if err != nil {
			t.Fatal(err)
		}
		total += int(st.Packets)
		return total
	}
}

// TryRecvBatch returns at once with nothing queued, and WaitReadable
// returns when a frame comes.
func TestTryRecvAndWait(t *testing.T) {
	t.Parallel()
	a, b := vethPair(t)
	defer a.Close()
	defer b.Close()
	bufs, sizes := recvBufs(4)
	if n, err := a.TryRecvBatch(bufs, sizes); n != 0 || err != nil {
		t.Fatalf("TryRecvBatch on an empty socket: %d, %v", n, err)
	}
	waited := make(chan error, 1)
	go func() { waited <- a.WaitReadable() }()
	select {
	case err := <-waited:
		t.Fatalf("WaitReadable returned %v with nothing sent", err)
	case <-time.After(20 * time.Millisecond): // it must still be waiting: a bound, not a pause for progress
	}
	if err := b.Send(testFrames(1)[0]); err != nil {
		t.Fatal(err)
	}
	if err := waitfor.Receive(t, waited, "WaitReadable returning once a frame was sent"); err != nil {
		t.Fatal(err)
	}
	if n, err := a.TryRecvBatch(bufs, sizes); n != 1 || err != nil {
		t.Fatalf("TryRecvBatch after the wait: %d, %v; want the frame", n, err)
	}
	// Close ends a wait.
	go func() { waited <- a.WaitReadable() }()
	a.Close()
	if err := waitfor.Receive(t, waited, "WaitReadable returning once the socket was closed"); err == nil {
		t.Fatal("WaitReadable returned nil after Close")
	}
}

// The batched path allocates nothing per batch: the packet library's
// ReadFrom and WriteTo allocated an address per frame.
func TestBatchAllocatesNothing(t *testing.T) {
	a, b := vethPair(t)
	defer a.Close()
	defer b.Close()
	frames := testFrames(16)
	bufs, sizes := recvBufs(16)
	allocs := testing.AllocsPerRun(50, func() {
		if _, err := b.SendBatch(frames); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < len(frames); {
			bound(t, a)
			n, err := a.RecvBatch(bufs, sizes)
			if err != nil {
				expired(t, err, "a frame of the batch SendBatch sent")
				t.Fatal(err)
			}
			got += n
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per batch of %d frames sent and received; want 0", allocs, len(frames))
	}
}
