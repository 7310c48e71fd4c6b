package realtime

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/emu/host"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// TestHostNetTLPPort: a libtlp-like client writes the emulated host's DRAM
// through the host's NetTLP port and reads it back; the emulated host sees
// the bytes in its memory, the client sees what the host wrote, and MMIO
// space is refused, all while the simulation runs on the wall clock.
func TestHostNetTLPPort(t *testing.T) {
	t.Parallel()
	privtest.Loopback(t)
	s := sim.New(1)
	clk := New(s)
	h := host.New(s, host.Config{})
	portAddr, clientAddr := netip.MustParseAddr("127.0.43.2"), netip.MustParseAddr("127.0.43.1")
	port, err := ServeNetTLP(context.Background(), nettlp.TargetConfig{Addr: portAddr}, h, clk)
	if err != nil {
		t.Fatalf("cannot bind %v: %v", portAddr, err)
	}
	defer func() {
		if err := port.Close(); err != nil {
			t.Error(err)
		}
	}()
	// The simulation keeps running meanwhile: accesses interleave with
	// its steps under the world lock.
	stop := make(chan struct{})
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		for {
			select {
			case <-stop:
				return
			default:
			}
			s.After(10*time.Microsecond, func() {})
			clk.Advance(time.Millisecond)
		}
	}()
	defer func() { close(stop); <-ran }()

	c, err := nettlp.Dial(clientAddr, portAddr, 5, tlp.NewID(0x1b, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Timeout = 5 * time.Second

	buf := h.Alloc(1<<20, 4096)
	for _, a := range []uint64{0x1000, 0x2003, buf + 0x10, buf + 0xffd} {
		data := make([]byte, 200)
		for i := range data {
			data[i] = byte(a) ^ byte(i*7)
		}
		if _, err := c.WriteAligned(a, data, 128); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(data))
		if n, err := c.ReadAligned(a, got, 128); err != nil || n != len(got) {
			t.Fatalf("read %#x: %d bytes, %v", a, n, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("read back %#x: % x, wrote % x", a, got[:16], data[:16])
		}
		seen := make([]byte, len(data))
		clk.World().Lock()
		h.Mem.Read(a, seen)
		clk.World().Unlock()
		if !bytes.Equal(seen, data) {
			t.Fatalf("the host's memory at %#x holds % x, the client wrote % x", a, seen[:16], data[:16])
		}
	}

	// What the host writes, the client reads.
	clk.World().Lock()
	h.Mem.PutUint64(buf+0x800, 0x1122334455667788)
	clk.World().Unlock()
	var w [8]byte
	if _, err := c.Read(buf+0x800, w[:]); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w[:], []byte{0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11}) {
		t.Fatalf("client read % x", w)
	}

	// MMIO space is not DRAM: UR, which libtlp reports as a bad message.
	if _, err := c.Read(host.Mem32Base, w[:4]); !errors.Is(err, nettlp.ErrBadCompletion) {
		t.Fatalf("read of %#x: %v, want a UR", uint64(host.Mem32Base), err)
	}
	// The target counts a UR after sending it: give it a moment.
	waitfor.Until(t, "the port counting its UR", func() bool { return port.Target.Stats().UR.Load() != 0 })
	st := port.Target.Stats().Snapshot()
	if st.UR != 1 || st.Writes == 0 || st.Reads == 0 {
		t.Fatalf("port stats %+v", st)
	}
}
