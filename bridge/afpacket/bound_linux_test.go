package afpacket

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/waitfor"
)

// The waits in these tests are bounded: a frame that never comes (a
// broken send, a receive that drops frames) fails the test after
// waitfor.Stall, saying what did not come, instead of hanging it until go
// test's timeout. The bound is on one wait for the next frame, not on the
// work as a whole.

// bound sets c's read deadline waitfor.Stall from now: the receives and
// WaitReadable then fail with os.ErrDeadlineExceeded. It allocates
// nothing, for the allocation tests.
func bound(t *testing.T, c *Conn) {
	if err := c.c.SetReadDeadline(time.Now().Add(waitfor.Stall)); err != nil {
		t.Fatalf("read deadline on %s: %v", c.ifi.Name, err)
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

// recvBatch is c.RecvBatch bounded: it fails the test when nothing came
// within waitfor.Stall; what names the frame it waits for.
func recvBatch(t *testing.T, c *Conn, what string, bufs [][]byte, sizes []int) (int, error) {
	t.Helper()
	bound(t, c)
	defer c.c.SetReadDeadline(time.Time{})
	n, err := c.RecvBatch(bufs, sizes)
	expired(t, err, what)
	return n, err
}
