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
