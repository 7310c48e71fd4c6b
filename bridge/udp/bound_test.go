package udp

import (
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/waitfor"
)

// The waits in these tests are bounded: a frame that never comes (a
// broken send, a receive that drops frames) fails the test after
// waitfor.Stall, saying what did not come, instead of hanging it until go
// test's timeout. The bound is on one wait for the next frame, not on the
// work as a whole.

// within runs wait, a call on c that blocks until something comes, and
// fails the test when it has not returned within waitfor.Stall; what
// names what it waits for. A socket of Listen takes a read deadline; one
// of ListenBusyPoll, outside the runtime's poller, has none: a timer
// closes it.
func within(t *testing.T, c *Conn, what string, wait func() error) error {
	t.Helper()
	var closed atomic.Bool
	if c.raw == nil {
		bound(t, c)
		defer c.c.SetReadDeadline(time.Time{})
	} else {
		timer := time.AfterFunc(waitfor.Stall, func() { closed.Store(true); c.Close() })
		defer timer.Stop()
	}
	err := wait()
	expired(t, err, what)
	if closed.Load() {
		t.Fatalf("%s: nothing came within %v (%v)", what, waitfor.Stall, err)
	}
	return err
}

// bound sets the read deadline of c (a socket of Listen) waitfor.Stall
// from now. It allocates nothing, for the allocation tests.
func bound(t *testing.T, c *Conn) {
	if err := c.c.SetReadDeadline(time.Now().Add(waitfor.Stall)); err != nil {
		t.Fatalf("read deadline on %v: %v", c.LocalAddr(), err)
	}
}

// expired fails the test, saying what did not come, when err is a wait
// that bound ended.
func expired(t *testing.T, err error, what string) {
	t.Helper()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: nothing came within %v (%v)", what, waitfor.Stall, err)
	}
}
