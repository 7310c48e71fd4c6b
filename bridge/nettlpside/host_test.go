package nettlpside

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/tlp"
)

// A 4 KiB read's 16 CplDs reach the NetTLP adapter whole, in order and
// numbered, in one send system call per delivery batch instead of one
// sendto each (which cost 40% of the bridges' CPU in bench scale).
func TestHostBatchesCompletions(t *testing.T) {
	privtest.Loopback(t)
	const base, size, tag = 0x20_0000_0000, 4096, 5
	local, remote := netip.MustParseAddr("127.0.86.1"), netip.MustParseAddr("127.0.86.2")
	// The real adapter's tag port, where the host's completions go.
	sink, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(remote, nettlp.Port(tag))))
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	a, err := nettlp.NewAdapter(nettlp.AdapterConfig{Local: local, Remote: remote})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	rs, _, gp := framingPair(t)
	h, err := NewHost(rs[0], a, nil)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := nettlp.NewSparseMemory(base, 1<<20, func(a uint64) byte { return byte(a * 7) })
	if err != nil {
		t.Fatal(err)
	}
	dev, err := NewMemoryDevice(rs[1], mem, nettlp.CompleterConfig{CompleterID: tlp.NewID(3, 0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, f := range []func(context.Context) error{rs[0].Run, rs[1].Run, dev.Run} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = f(ctx) }()
	}
	defer func() { cancel(); wg.Wait() }()
	waitfor.Until(t, "link up", func() bool { return rs[0].State() == bridge.StateUp && rs[1].State() == bridge.StateUp })

	calls, frames := a.Transport().SendCalls(), gp.sent.Load()
	req, err := (&tlp.Packet{Kind: tlp.MRd, Addr64: true, Length: size / 4, Tag: tag, FirstBE: 0xf, LastBE: 0xf, Address: base}).AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := driver.SendWait(ctx, rs[0], req); err != nil {
		t.Fatal(err)
	}
	var got []byte
	buf := make([]byte, nettlp.MaxDatagram)
	for i := 0; len(got) < size; i++ {
		_ = sink.SetReadDeadline(time.Now().Add(waitfor.Stall))
		n, src, err := sink.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("after %d bytes of %d: %v", len(got), size, err)
		}
		if want := netip.AddrPortFrom(local, nettlp.Port(tag)); src != want {
			t.Fatalf("datagram %d from %v, want %v", i, src, want)
		}
		d := buf[:n]
		if seq := nettlp.Header(d).Seq(); seq != uint16(i) {
			t.Fatalf("datagram %d numbered %d", i, seq)
		}
		v := tlp.View(d[nettlp.HeaderLen:])
		if v.Kind() != tlp.CplD || v.Tag() != tag {
			t.Fatalf("datagram %d holds %v tag %d, want a CplD of tag %d", i, v.Kind(), v.Tag(), tag)
		}
		got = append(got, v.Payload()...)
	}
	for i := range size {
		if got[i] != byte((base+uint64(i))*7) {
			t.Fatalf("byte %d of the read is %#x, want %#x", i, got[i], byte((base+uint64(i))*7))
		}
	}
	// The pipe hands the host one frame per receive, so one call per
	// frame that carried completions; one per CplD (16) without batching.
	calls = a.Transport().SendCalls() - calls
	frames = gp.sent.Load() - frames
	if calls > frames || calls >= 16 || h.Lost() != 0 {
		t.Errorf("16 CplDs in %d frames took %d send calls (lost %d), want at most one a frame", frames, calls, h.Lost())
	}
}
