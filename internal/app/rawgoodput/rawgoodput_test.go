package rawgoodput

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge/udp"
)

func loopbackPair(t *testing.T) (tx, rx *udp.Conn) {
	t.Helper()
	lo := netip.MustParseAddrPort("127.0.0.1:0")
	rx, err := udp.Listen(lo, netip.AddrPort{})
	if err != nil {
		t.Fatal(err)
	}
	tx, err = udp.Listen(lo, rx.LocalAddr())
	if err != nil {
		rx.Close()
		t.Fatal(err)
	}
	rx.SetPeer(tx.LocalAddr())
	return tx, rx
}

// TestUDP: the flood delivers datagrams of the asked size, counts no more
// than it sent, and reports a positive rate (no figure is asserted).
func TestUDP(t *testing.T) {
	tx, rx := loopbackPair(t)
	r, err := UDP(context.Background(), tx, rx, 1400, []byte{1, 2, 3}, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.GoodputGbps <= 0 || r.DatagramBytes != 1400 || r.Received == 0 || r.Received > r.Sent {
		t.Fatalf("result %+v", r)
	}
}

// TestUDPNothingArrives: a flood none of whose datagrams reaches the
// receiver (here its socket takes only another peer's) fails after the
// warm-up, naming it, with no figure.
func TestUDPNothingArrives(t *testing.T) {
	defer func(w time.Duration) { warmUp = w }(warmUp)
	warmUp = 100 * time.Millisecond
	tx, rx := loopbackPair(t)
	rx.SetPeer(netip.MustParseAddrPort("127.0.0.1:9"))
	r, err := UDP(context.Background(), tx, rx, 1400, nil, 10*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "arrived in 100ms of warm-up") || r != (UDPResult{}) {
		t.Fatalf("got %+v, %v; want the warm-up's error and no figure", r, err)
	}
}

// TestUDPWindowAfterWarmUp: the window opens once a datagram arrived, so
// even a window shorter than a scheduler's time slice measures something.
func TestUDPWindowAfterWarmUp(t *testing.T) {
	tx, rx := loopbackPair(t)
	r, err := UDP(context.Background(), tx, rx, 9000, nil, time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.Sent == 0 {
		t.Fatalf("result %+v: nothing sent in the window", r)
	}
}

// TestUDPRefuses: a datagram shorter than its prefix, or a duration of
// zero, is refused, and the sockets are closed either way.
func TestUDPRefuses(t *testing.T) {
	for name, c := range map[string]struct {
		size int
		d    time.Duration
	}{"short": {2, time.Millisecond}, "no time": {100, 0}, "huge": {70000, time.Millisecond}} {
		tx, rx := loopbackPair(t)
		if _, err := UDP(context.Background(), tx, rx, c.size, []byte{1, 2, 3}, c.d); err == nil {
			t.Errorf("%s: no error", name)
		}
		if err := tx.Send([]byte{1}); err == nil {
			t.Errorf("%s: the sender's socket is still open", name)
		}
	}
}

func TestTCPLoopback(t *testing.T) {
	g, err := TCPLoopback(context.Background(), 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if g <= 0 {
		t.Fatalf("goodput %v", g)
	}
}

// TestErrorsWriteUs: the refusals and the warm-up's failure name their
// durations as `dxpu help units` spells them (500us, never Go's 500µs).
func TestErrorsWriteUs(t *testing.T) {
	tx, rx := loopbackPair(t)
	if _, err := UDP(context.Background(), tx, rx, 100, nil, -5*time.Microsecond); err == nil || !strings.HasSuffix(err.Error(), "duration -5us: must be positive") {
		t.Errorf("UDP for -5us: %v, want it refused as -5us", err)
	}
	if _, err := TCPLoopback(context.Background(), -5*time.Microsecond); err == nil || !strings.HasSuffix(err.Error(), "duration -5us: must be positive") {
		t.Errorf("TCPLoopback for -5us: %v, want it refused as -5us", err)
	}
	defer func(w time.Duration) { warmUp = w }(warmUp)
	warmUp = 500 * time.Microsecond
	tx, rx = loopbackPair(t)
	rx.SetPeer(netip.MustParseAddrPort("127.0.0.1:9"))
	if _, err := UDP(context.Background(), tx, rx, 1400, nil, 10*time.Millisecond); err == nil || !strings.Contains(err.Error(), "arrived in 500us of warm-up") {
		t.Errorf("a flood nothing of which arrives: %v, want the warm-up of 500us named", err)
	}
}
