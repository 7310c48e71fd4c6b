package afpacket

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/internal/waitfor"
)

// returns runs fn and fails the test when it has not returned after
// waitfor.Stall; unblock then ends what fn waits for.
func returns(t *testing.T, what string, fn, unblock func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(waitfor.Stall):
		unblock()
		<-done
		t.Fatalf("%s did not return within %v", what, waitfor.Stall)
	}
}

// A frame the link refuses (over its MTU) ends SendBatch with an error
// naming the interface, and the count says which frame failed: those
// before it went out (the same sendmmsg sent them), the one after it was
// not tried.
func TestSendBatchStopsAtRefusedFrame(t *testing.T) {
	t.Parallel()
	a, b := vethPair(t)
	defer a.Close()
	defer b.Close()
	frames := testFrames(4)
	frames[2] = make([]byte, b.MTU()+100)
	var n int
	var err error
	returns(t, "SendBatch with a frame over the MTU", func() { n, err = b.SendBatch(frames) }, func() { b.Close() })
	if n != 2 || err == nil || !strings.Contains(err.Error(), "afpacket: send on dx1") {
		t.Fatalf("SendBatch with frame 2 over the MTU: %d sent, %v; want 2 and an error naming dx1", n, err)
	}
	bufs, sizes := recvBufs(8)
	for i := range 2 {
		k, err := recvBatch(t, a, fmt.Sprintf("frame %d, sent before the refused one", i), bufs[:1], sizes)
		if err != nil || k != 1 || !bytes.HasPrefix(bufs[0][:sizes[0]], frames[i]) {
			t.Fatalf("frame %d before the refused one: %d, %v, %q", i, k, err, bufs[0][:12])
		}
	}
	if k, err := a.TryRecvBatch(bufs, sizes); k != 0 || err != nil {
		t.Fatalf("after the refused frame: %d more frames (%q...), %v; want none: SendBatch stops there", k, bufs[0][:12], err)
	}
}

// An empty frame is not a panic: SendBatch sends it (the link pads it) or
// refuses it, and the frame after it still goes out.
func TestSendBatchEmptyFrame(t *testing.T) {
	t.Parallel()
	a, b := vethPair(t)
	defer a.Close()
	defer b.Close()
	frames := [][]byte{{}, testFrames(1)[0]}
	n, err := b.SendBatch(frames)
	switch {
	case n == len(frames) && err == nil:
	case n == 0 && err != nil:
		if _, err := b.SendBatch(frames[1:]); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("SendBatch with an empty frame first: %d of %d sent, %v", n, len(frames), err)
	}
	bufs, sizes := recvBufs(1)
	for range n + 1 { // the empty frame, when it went out, comes first
		k, err := recvBatch(t, a, "the frame after the empty one", bufs, sizes)
		if err != nil || k != 1 {
			t.Fatalf("RecvBatch: %d, %v", k, err)
		}
		if bytes.HasPrefix(bufs[0][:sizes[0]], frames[1]) {
			return
		}
	}
	t.Fatalf("the frame after the empty one never came (last got %q...)", bufs[0][:min(12, sizes[0])])
}

// A receive whose whole batch came from strangers is no result: RecvBatch
// goes on to the peer's frame behind them instead of returning 0.
func TestRecvBatchSkipsForeignBatch(t *testing.T) {
	t.Parallel()
	a, b, raw := vethPairRaw(t)
	defer a.Close()
	defer b.Close()
	defer raw.Close()
	seen := packetsSeen(t, a)
	for i := range 3 {
		if err := raw.send(net.HardwareAddr{0x02, 0x5e, 0, 0, 0x99, byte(i)}, []byte("from a stranger, padded to sixty bytes or so......")); err != nil {
			t.Fatal(err)
		}
	}
	peer := testFrames(1)[0]
	if err := b.Send(peer); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, "the strangers' frames and the peer's queued", func() bool { return seen() >= 4 })
	bufs, sizes := recvBufs(3) // the first receive takes only the strangers'
	n, err := recvBatch(t, a, "the peer's frame behind the strangers'", bufs, sizes)
	if err != nil || n != 1 || !bytes.HasPrefix(bufs[0][:sizes[0]], peer) {
		t.Fatalf("RecvBatch after a batch of strangers' frames: %d, %v; want the peer's frame", n, err)
	}
	if got := a.ForeignDropped(); got != 3 {
		t.Fatalf("ForeignDropped %d, want 3", got)
	}
}

// A stranger whose MAC differs from the peer's in its last byte only is a
// stranger: all six bytes are compared.
func TestForeignDiffersInLastByte(t *testing.T) {
	t.Parallel()
	a, b, raw := vethPairRaw(t)
	defer a.Close()
	defer b.Close()
	defer raw.Close()
	near := append(net.HardwareAddr(nil), a.peer.HardwareAddr...)
	near[5] ^= 1
	seen := packetsSeen(t, a)
	if err := raw.send(near, []byte("from the peer's neighbour, padded to sixty bytes.....")); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, "the neighbour's frame queued", func() bool { return seen() >= 1 })
	bufs, sizes := recvBufs(4)
	if n, err := a.TryRecvBatch(bufs, sizes); n != 0 || err != nil || a.ForeignDropped() != 1 {
		t.Fatalf("a frame from %v (peer %v): taken %d, %v, %d dropped; want it dropped as foreign", near, a.peer.HardwareAddr, n, err, a.ForeignDropped())
	}
}

// TryRecvBatch never waits: while another goroutine waits in RecvBatch it
// returns 0 at once (driver.Poller).
func TestTryRecvBatchWhileReceiving(t *testing.T) {
	t.Parallel()
	a, b := vethPair(t)
	defer a.Close()
	defer b.Close()
	bufs, sizes := recvBufs(4)
	type result struct {
		n   int
		err error
	}
	got := make(chan result, 1)
	go func() {
		n, err := a.RecvBatch(bufs, sizes)
		got <- result{n, err}
	}()
	waitfor.Until(t, "RecvBatch waiting", func() bool {
		if a.b.rxMu.TryLock() {
			a.b.rxMu.Unlock()
			return false
		}
		return true
	})
	tbufs, tsizes := recvBufs(4)
	var n int
	var err error
	returns(t, "TryRecvBatch while RecvBatch waits", func() { n, err = a.TryRecvBatch(tbufs, tsizes) }, func() {
		b.Send(testFrames(1)[0]) // ends RecvBatch, then TryRecvBatch's wait
	})
	if n != 0 || err != nil {
		t.Fatalf("TryRecvBatch while RecvBatch waits: %d, %v; want 0, nil", n, err)
	}
	frame := testFrames(1)[0]
	if err := b.Send(frame); err != nil {
		t.Fatal(err)
	}
	r := waitfor.Receive(t, got, "RecvBatch returning the frame sent to it")
	if r.err != nil || r.n != 1 || !bytes.HasPrefix(bufs[0][:sizes[0]], frame) {
		t.Fatalf("RecvBatch: %d, %v; want the frame", r.n, r.err)
	}
}

// The receive arguments are checked: fewer sizes than buffers, or no
// buffers, is an error, not a panic or a receive that takes nothing
// forever; more buffers than MaxBatch take MaxBatch frames.
func TestRecvBatchArguments(t *testing.T) {
	t.Parallel()
	a, b := vethPair(t)
	defer a.Close()
	defer b.Close()
	bufs, sizes := recvBufs(MaxBatch + 16)
	for _, c := range []struct {
		name  string
		bufs  [][]byte
		sizes []int
		want  string
	}{
		{"fewer sizes", bufs[:4], sizes[:3], "3 sizes for 4 buffers"},
		{"no buffers", nil, nil, "no buffers"},
	} {
		if n, err := a.TryRecvBatch(c.bufs, c.sizes); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("TryRecvBatch, %s: %d, %v; want an error saying %q", c.name, n, err, c.want)
		}
		var n int
		var err error
		returns(t, "RecvBatch, "+c.name, func() { n, err = a.RecvBatch(c.bufs, c.sizes) }, func() { a.Close() })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("RecvBatch, %s: %d, %v; want an error saying %q", c.name, n, err, c.want)
		}
	}
	frames := testFrames(MaxBatch + 16)
	seen := packetsSeen(t, a)
	if n, err := b.SendBatch(frames); err != nil || n != len(frames) {
		t.Fatalf("SendBatch: %d, %v", n, err)
	}
	waitfor.Until(t, "the frames queued", func() bool { return seen() >= len(frames) })
	if n, err := a.TryRecvBatch(bufs, sizes); n != MaxBatch || err != nil {
		t.Fatalf("TryRecvBatch into %d buffers: %d, %v; want MaxBatch (%d)", len(bufs), n, err, MaxBatch)
	}
	if n, err := recvBatch(t, a, "the last 16 frames", bufs, sizes); n != 16 || err != nil || !bytes.HasPrefix(bufs[15][:sizes[15]], frames[MaxBatch+15]) {
		t.Fatalf("RecvBatch for the rest: %d, %v; want the last 16 frames", n, err)
	}
}

// A receive error is reported, not taken for "nothing queued": with its
// interface down, the socket's receives fail (ENETDOWN) and say where.
func TestRecvBatchReportsInterfaceDown(t *testing.T) {
	t.Parallel()
	a, b := vethPair(t)
	defer a.Close()
	defer b.Close()
	// The veth pair lives in the namespace vethPair made: reach it
	// through the socket's (SIOCGSKNS).
	var nsfd int
	var serr error
	if err := a.b.rc.Control(func(fd uintptr) { nsfd, serr = unix.IoctlRetInt(int(fd), unix.SIOCGSKNS) }); err != nil || serr != nil {
		t.Fatalf("the socket's network namespace: %v, %v", err, serr)
	}
	ns := netns.NsHandle(nsfd)
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l, err := h.LinkByName("dx0")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetDown(l); err != nil {
		t.Fatal(err)
	}
	bufs, sizes := recvBufs(4)
	n, err := a.TryRecvBatch(bufs, sizes)
	if err == nil || !errors.Is(err, unix.ENETDOWN) || !strings.Contains(err.Error(), "afpacket: receive on dx0") {
		t.Fatalf("TryRecvBatch with dx0 down: %d, %v; want ENETDOWN naming dx0", n, err)
	}
}
