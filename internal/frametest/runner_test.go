package frametest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/tlp/encap"
)

// fakeConn is a transport whose received frames the test feeds and whose
// foreign count it sets; it keeps the first frame sent.
type fakeConn struct {
	frames  chan []byte
	sent    chan []byte
	closed  chan struct{}
	once    sync.Once
	foreign atomic.Uint64
}

func newFakeConn() *fakeConn {
	return &fakeConn{frames: make(chan []byte, 8), sent: make(chan []byte, 1), closed: make(chan struct{})}
}

func (c *fakeConn) Send(f []byte) error {
	select {
	case c.sent <- append([]byte(nil), f...):
	default:
	}
	return nil
}

func (c *fakeConn) Recv(buf []byte) (int, error) {
	select {
	case f := <-c.frames:
		return copy(buf, f), nil
	case <-c.closed:
		return 0, net.ErrClosed
	}
}

func (c *fakeConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

func (c *fakeConn) ForeignDropped() uint64 { return c.foreign.Load() }

// recordTB records Errorf instead of failing the test.
type recordTB struct {
	testing.TB
	errs []string
}

func (r *recordTB) Helper() {}
func (r *recordTB) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// HostRunner: a host-side bridge of the pair runs over the conn (its
// HELLO says so; it drops a cut-short frame and another pair's); when the
// test ends the conn is closed and Run has returned.
// AwaitForeignCounted passes on the runner's counts and reports a socket
// count that is not the runner's.
func TestHostRunner(t *testing.T) {
	t.Parallel()
	const pair = 0x42
	conn := newFakeConn()
	var r *driver.Runner
	t.Run("running", func(t *testing.T) {
		r = HostRunner(t, pair, conn)
		conn.foreign.Store(5)
		conn.frames <- Hello(pair)[:12]
		AwaitForeignCounted(t, r, 5, conn.ForeignDropped)

		rec := &recordTB{TB: t}
		AwaitForeignCounted(rec, r, 5, func() uint64 { return 4 })
		if len(rec.errs) != 1 {
			t.Errorf("a socket count of 4 against the runner's 5: %d errors %q, want 1", len(rec.errs), rec.errs)
		}

		conn.frames <- Hello(pair + 1)
		waitfor.Until(t, "another pair's HELLO dropped", func() bool { return r.Counters().DroppedUnknownPair == 1 })
		f := <-conn.sent
		h, _, err := encap.ParseHeader(f)
		if err != nil || h.Type() != encap.MsgControl || len(h.Body()) < 3 || encap.ControlType(h.Body()[0]) != encap.CtlHello {
			t.Fatalf("first frame sent % x (%v): want a HELLO", f, err)
		}
		if role := encap.Role(h.Body()[2]); h.PairID() != pair || role != encap.RoleHost {
			t.Errorf("HELLO of pair %#x from role %v, want pair %#x from the host side", h.PairID(), role, pair)
		}
	})
	select {
	case <-conn.closed:
	default:
		t.Fatal("the conn is still open after the test ended")
	}
	if err := r.Send(make([]byte, 12)); !errors.Is(err, driver.ErrClosed) {
		t.Fatalf("Send after the test ended: %v, want %v (Run returned)", err, driver.ErrClosed)
	}
}

// Ethernet: destination, source, EtherType 0x88B5, then the frame, in a
// new slice.
func TestEthernet(t *testing.T) {
	t.Parallel()
	dst, src := net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}
	frame := []byte("dxpu")
	b := Ethernet(dst, src, frame)
	if !bytes.Equal(b[:6], dst) || !bytes.Equal(b[6:12], src) || binary.BigEndian.Uint16(b[12:]) != encap.EtherType || string(b[14:]) != "dxpu" {
		t.Fatalf("% x: want dst, src, 88 b5, then the frame", b)
	}
	b[14] = 'X'
	if string(frame) != "dxpu" {
		t.Fatal("Ethernet wrote into the caller's frame")
	}
}

// SendStrangers: each stranger its own address, none of them a pair's,
// sends HELLOs of the pair and junk by turns, a HELLO first.
func TestSendStrangers(t *testing.T) {
	t.Parallel()
	const pair = 9
	type sent struct {
		src   string
		hello bool
	}
	var got []sent
	hello := SendStrangers(t, pair, 3, 3, func(src net.HardwareAddr, f []byte) error {
		got = append(got, sent{src.String(), bytes.Equal(f, Hello(pair))})
		return nil
	})
	if !bytes.Equal(hello, Hello(pair)) {
		t.Fatalf("returned % x, want the pair's HELLO", hello)
	}
	var want []sent
	for i := range 3 {
		for j := range 3 {
			want = append(want, sent{fmt.Sprintf("02:5e:00:00:99:%02x", i), j%2 == 0})
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("sent %v, want %v", got, want)
	}
}
