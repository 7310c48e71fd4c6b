package chaos

import (
	"context"
	"net"
	"testing"

	"github.com/dxpu/dxpu/internal/waitfor"
)

// TestCableCarriesAndCuts: the cable forwards the box's frames to the
// switch and everyone else's to the box, and drops both ways while cut.
func TestCableCarriesAndCuts(t *testing.T) {
	listen := func() *net.UDPConn {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	box, sw := listen(), listen()
	cb, err := newCable("127.0.0.1:0", box.LocalAddr().String(), sw.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go cb.run(ctx)
	at := cb.conn.LocalAddr().(*net.UDPAddr)
	recv := func(c *net.UDPConn) string {
		buf := make([]byte, 64)
		n, _, err := c.ReadFromUDP(buf)
		if err != nil {
			t.Fatal(err)
		}
		return string(buf[:n])
	}
	box.WriteToUDP([]byte("up"), at)
	if got := recv(sw); got != "up" {
		t.Fatalf("the switch got %q from the box", got)
	}
	sw.WriteToUDP([]byte("down"), at)
	if got := recv(box); got != "down" {
		t.Fatalf("the box got %q from the switch", got)
	}
	cb.cut.Store(true)
	box.WriteToUDP([]byte("lost up"), at)
	sw.WriteToUDP([]byte("lost down"), at)
	waitfor.Until(t, "the cut cable reads both frames", func() bool { return cb.dropped.Load() == 2 })
	cb.cut.Store(false)
	box.WriteToUDP([]byte("again"), at)
	for {
		got := recv(sw)
		if got == "again" {
			break
		}
		if got == "lost up" {
			t.Fatal("a frame sent while the cable was cut reached the switch")
		}
	}
}

// TestCableLoses: a lossy cable drops a share of the frames and forwards
// the rest; back at zero it forwards every frame again.
func TestCableLoses(t *testing.T) {
	sink, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	box, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	cb, err := newCable("127.0.0.1:0", box.LocalAddr().String(), sink.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go cb.run(ctx)
	at := cb.conn.LocalAddr().(*net.UDPAddr)
	cb.lossPPM.Store(500_000)
	const n = 200
	for range n {
		// One at a time, so that no frame is lost to a full socket buffer.
		before := cb.frames.Load() + cb.lost.Load()
		box.WriteToUDP([]byte("f"), at)
		waitfor.Until(t, "the cable reads the frame", func() bool { return cb.frames.Load()+cb.lost.Load() > before })
	}
	if lost := cb.lost.Load(); lost == 0 || lost == n {
		t.Fatalf("a cable losing half its frames lost %d of %d", lost, n)
	}
	cb.lossPPM.Store(0)
	lost := cb.lost.Load()
	for range 50 {
		box.WriteToUDP([]byte("g"), at)
	}
	waitfor.Until(t, "the cable forwards the last frames", func() bool { return cb.frames.Load()+cb.lost.Load() >= n+50 })
	if cb.lost.Load() != lost {
		t.Fatalf("a healed cable lost %d frames", cb.lost.Load()-lost)
	}
}
