package udp

import (
	"errors"
	"fmt"
)

// The busy-polling receive (driver.Poller) is offered on Linux only, where
// recvmmsg(2) takes MSG_DONTWAIT; elsewhere a runner blocks in RecvBatch.

// TryRecvBatch is RecvBatch that never waits: it takes the frames already
// queued, and returns 0 when there are none or when another goroutine is
// receiving on c at the moment. Any goroutine may call it, also while one
// waits in WaitReadable: a busy-polling loop takes frames without a
// goroutine switch.
func (c *Conn) TryRecvBatch(bufs [][]byte, sizes []int) (int, error) {
	if len(sizes) < len(bufs) {
		return 0, fmt.Errorf("udp: receive: %d sizes for %d buffers", len(sizes), len(bufs))
	}
	bufs = bufs[:min(len(bufs), MaxBatch)]
	if len(bufs) == 0 {
		return 0, errors.New("udp: receive: no buffers")
	}
	if !c.rxMu.TryLock() {
		return 0, nil
	}
	defer c.rxMu.Unlock()
	n, err := c.sys.tryRecvBatch(c, bufs, sizes)
	if err != nil {
		return 0, wrapErr("receive", err)
	}
	return n, nil
}

// WaitReadable blocks until a datagram is queued (from any source) or c
// is closed; it takes nothing. With TryRecvBatch it makes a receive loop
// whose frames other goroutines may take while it waits: once it waited,
// it returns when a datagram came without looking again, so the
// TryRecvBatch that follows may find that another goroutine took it (and
// the loop waits again). Call it from one goroutine at a time.
func (c *Conn) WaitReadable() error {
	if err := c.sys.waitReadable(); err != nil {
		return wrapErr("receive", err)
	}
	return nil
}

// EnableGRO turns on UDP generic receive offload: a run of datagrams of
// one size from one source (a UDP_SEGMENT send of the peer on loopback,
// or what a NIC coalesced) may then arrive as one message, which only
// TryRecvSegments cuts apart: once it returned true, receive with
// TryRecvSegments only (RecvBatch and TryRecvBatch would hand such a
// message over as one frame). It reports false where the kernel refuses
// it; receiving is then as before. On loopback the kernel then no longer
// cuts the peer's segmented sends into datagrams one skb each, and one
// message carries a run of frames up the stack.
func (c *Conn) EnableGRO() bool {
	c.rxMu.Lock()
	defer c.rxMu.Unlock()
	return c.sys.enableGRO()
}

// TryRecvSegments is TryRecvBatch for a socket with EnableGRO: bufs[i]
// holds sizes[i] bytes, which are frames of segs[i] bytes each, the last
// possibly shorter (one frame when segs[i] == sizes[i]). Without GRO
// every segs[i] is sizes[i].
func (c *Conn) TryRecvSegments(bufs [][]byte, sizes, segs []int) (int, error) {
	if len(sizes) < len(bufs) || len(segs) < len(bufs) {
		return 0, fmt.Errorf("udp: receive: %d sizes and %d segment sizes for %d buffers", len(sizes), len(segs), len(bufs))
	}
	bufs = bufs[:min(len(bufs), MaxBatch)]
	if len(bufs) == 0 {
		return 0, errors.New("udp: receive: no buffers")
	}
	if !c.rxMu.TryLock() {
		return 0, nil
	}
	defer c.rxMu.Unlock()
	n, err := c.sys.tryRecvSegments(c, bufs, sizes, segs)
	if err != nil {
		return 0, wrapErr("receive", err)
	}
	return n, nil
}

// Coalesced returns how many messages TryRecvSegments took that held more
// than one frame.
func (c *Conn) Coalesced() uint64 { return c.sys.coalesced.Load() }
