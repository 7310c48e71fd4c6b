package driver

import (
	"context"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/udp"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/tlp"
)

// stallPair is a host and a GPU runner over loopback UDP (a Poller), up,
// the GPU side answering every read with one completion at once.
func stallPair(t *testing.T, cplTimeout time.Duration) (host *Runner, completions, aborts *atomic.Int32) {
	t.Helper()
	lo := netip.MustParseAddrPort("127.0.0.1:0")
	hc, err := udp.Listen(lo, netip.AddrPort{})
	if err != nil {
		t.Fatal(err)
	}
	gc, err := udp.Listen(lo, hc.LocalAddr())
	if err != nil {
		hc.Close()
		t.Fatal(err)
	}
	hc.SetPeer(gc.LocalAddr())
	cfg := func(role bridge.Role) bridge.Config {
		c := bridge.Config{Role: role, Seed: uint64(role) + 1, MTU: 1472, MaxPayload: 256, Window: 64, TxQueue: 64,
			MinRTO: 2 * time.Millisecond, InitialRTO: 5 * time.Millisecond, AckDelay: 20 * time.Microsecond,
			DeadAfter: 5 * time.Second, Keepalive: time.Second, CompletionTimeout: cplTimeout}
		for i := range c.Credits {
			c.Credits[i] = bridge.ClassCredits{Headers: 32, Data: 32 * 256 / 16}
		}
		return c
	}
	hb, err := bridge.New(cfg(bridge.RoleHost))
	if err != nil {
		t.Fatal(err)
	}
	gb, err := bridge.New(cfg(bridge.RoleGPU))
	if err != nil {
		t.Fatal(err)
	}
	host, gpu := New(hb, hc), New(gb, gc)
	completions, aborts = new(atomic.Int32), new(atomic.Int32)
	host.OnTLP = func(v tlp.View) {
		if v.Status() == tlp.StatusSC {
			completions.Add(1)
		} else {
			aborts.Add(1)
		}
	}
	// OnTLP runs under the runner's lock: the answer goes out from a
	// goroutine of its own.
	reads := make(chan tlp.Packet, 64)
	gpu.OnTLP = func(v tlp.View) {
		if v.Kind() == tlp.MRd {
			reads <- tlp.Packet{Kind: tlp.CplD, Length: 1, CompleterID: 0x0300, RequesterID: v.RequesterID(), Tag: v.Tag(),
				Status: tlp.StatusSC, ByteCount: 4, LowerAddress: uint8(v.Address() & 0x7f), Data: []byte{1, 2, 3, 4}}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for {
			select {
			case cpl := <-reads:
				b, err := cpl.Encode()
				if err == nil {
					err = gpu.Send(b)
				}
				if err != nil {
					t.Error(err)
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	done := make(chan struct{}, 2)
	for _, r := range []*Runner{host, gpu} {
		go func() { _ = r.Run(ctx); done <- struct{}{} }()
	}
	t.Cleanup(func() { cancel(); <-done; <-done })
	waitfor.Until(t, "link up", func() bool { return host.State() == bridge.StateUp && gpu.State() == bridge.StateUp })
	return host, completions, aborts
}

// TestStallDoesNotAbortAnsweredReads: the host side's process stalls (here:
// its lock held) for three completion timeouts while a read is answered;
// the completion waits in its socket. After the stall the runner takes it
// before judging the read's timeout: the read completes, no Completer
// Abort. (Before, whichever ran first, the timer or the receive, handed the
// bridge the late time first: CA, the completion dropped as late; a
// linkbench run under -race on a loaded machine failed 896 of 2688 reads.)
func TestStallDoesNotAbortAnsweredReads(t *testing.T) {
	const cplTimeout = 30 * time.Millisecond
	host, completions, aborts := stallPair(t, cplTimeout)
	for i := range 5 {
		read := tlp.Packet{Kind: tlp.MRd, Length: 1, RequesterID: 0x0100, Tag: uint16(i), FirstBE: 0xf, Address: 0x1000 + uint64(i)*4}
		b, err := read.Encode()
		if err != nil {
			t.Fatal(err)
		}
		host.mu.Lock() // the stall: neither the timer nor a receive runs
		if err := host.b.HandleTLP(host.Now(), b); err != nil {
			host.mu.Unlock()
			t.Fatal(err)
		}
		host.flushAt(host.Now(), false) // the read leaves
		time.Sleep(3 * cplTimeout)      // the stall itself: the completion comes meanwhile
		host.mu.Unlock()
		waitfor.Until(t, "the read answered, one way or the other", func() bool { return completions.Load()+aborts.Load() > int32(i) })
	}
	if c, a := completions.Load(), aborts.Load(); c != 5 || a != 0 {
		t.Fatalf("after stalls past the completion timeout: %d reads completed, %d aborted; want 5 and 0 (counters %+v)", c, a, host.Counters())
	}
	if host.CaughtUp() == 0 {
		t.Fatalf("no frame taken after a stall ahead of the deadline")
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(host, nil))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "dxpu_bridge_caught_up_frames_total" {
			if got, want := f.GetMetric()[0].GetCounter().GetValue(), float64(host.CaughtUp()); got != want {
				t.Fatalf("dxpu_bridge_caught_up_frames_total %v, want %v", got, want)
			}
			return
		}
	}
	t.Fatal("no dxpu_bridge_caught_up_frames_total")
}
