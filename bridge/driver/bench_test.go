package driver_test

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/udp"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// udpPair starts a host and a GPU runner over UDP on loopback and waits
// until the link is up; delivered counts the TLPs the GPU side got.
func udpPair(tb testing.TB, delivered *atomic.Int64) (host, gpu *driver.Runner, stop func()) {
	tb.Helper()
	return udpPairBoth(tb, delivered, nil)
}

// udpPairBoth is udpPair that also counts in back the TLPs the host side
// got (back nil: not counted).
func udpPairBoth(tb testing.TB, delivered, back *atomic.Int64) (host, gpu *driver.Runner, stop func()) {
	tb.Helper()
	return udpPairOver(tb, udp.Listen, delivered, back)
}

// transportOf is what udpPairOver hands its runners for a socket: the
// socket itself, or (a benchmark's baseline) a wrapper.
var transportOf = func(c *udp.Conn) driver.Transport { return c }

// noGRO is a socket whose runner receives a datagram per frame: the
// baseline of UDP GRO.
type noGRO struct{ *udp.Conn }

func (noGRO) EnableGRO() bool { return false }

// udpPairOver is udpPairBoth over the sockets listen opens; each of opts
// runs on both runners before they start.
func udpPairOver(tb testing.TB, listen func(local, peer netip.AddrPort) (*udp.Conn, error), delivered, back *atomic.Int64, opts ...func(*driver.Runner)) (host, gpu *driver.Runner, stop func()) {
	tb.Helper()
	lo := netip.MustParseAddr("127.0.0.1")
	hc, err := listen(netip.AddrPortFrom(lo, 0), netip.AddrPort{})
	if err != nil {
		tb.Fatal(err)
	}
	gc, err := listen(netip.AddrPortFrom(lo, 0), hc.LocalAddr())
	if err != nil {
		tb.Fatal(err)
	}
	hc.SetPeer(gc.LocalAddr())
	cfg := bridge.Config{MTU: 9000, MaxPayload: 512, Window: 1024, TxQueue: 256,
		MinRTO: 200 * time.Microsecond, InitialRTO: 2 * time.Millisecond, AckDelay: 10 * time.Microsecond,
		DeadAfter: 500 * time.Millisecond, Keepalive: 5 * time.Millisecond}
	for i := range cfg.Credits {
		cfg.Credits[i] = bridge.ClassCredits{Headers: 512, Data: 512 * 512 / 16}
	}
	var runners [2]*driver.Runner
	for i, role := range []bridge.Role{bridge.RoleHost, bridge.RoleGPU} {
		c := cfg
		c.Role, c.Seed = role, uint64(i+1)
		b, err := bridge.New(c)
		if err != nil {
			tb.Fatal(err)
		}
		runners[i] = driver.New(b, transportOf([]*udp.Conn{hc, gc}[i]))
	}
	runners[1].OnTLP = func(tlp.View) { delivered.Add(1) }
	if back != nil {
		runners[0].OnTLP = func(tlp.View) { back.Add(1) }
	}
	for _, r := range runners {
		for _, o := range opts {
			o(r)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, r := range runners {
		wg.Add(1)
		go func() { defer wg.Done(); _ = r.Run(ctx) }()
	}
	stop = func() { cancel(); wg.Wait() }
	tb.Cleanup(stop)
	waitfor.Until(tb, "link up", func() bool {
		return runners[0].State() == bridge.StateUp && runners[1].State() == bridge.StateUp
	})
	return runners[0], runners[1], stop
}

// BenchmarkRunnerUDP pushes 256-byte posted writes through a host and a GPU
// runner over UDP on loopback, in bursts of 16 (SendMany) and one at a
// time (Send, a frame each), until the GPU side has them all. ns/op is per
// TLP; allocs/op covers both runners, both sockets and the bridges.
func BenchmarkRunnerUDP(b *testing.B) {
	for _, burst := range []int{16, 1} {
		name := map[int]string{16: "burst16", 1: "single"}[burst]
		b.Run(name, func(b *testing.B) {
			var delivered atomic.Int64
			host, gpu, stop := udpPair(b, &delivered)
			defer stop()
			tlps := make([][]byte, burst)
			for i := range tlps {
				p := tlp.Packet{Kind: tlp.MWr, Addr64: true, FirstBE: 0xf, LastBE: 0xf,
					Address: 0x10_0000_0000 + uint64(i)*4096, Data: make([]byte, 256)}
				tlps[i], _ = p.AppendTo(nil)
			}
			wait := time.NewTimer(time.Hour)
			waits := 0
			b.ReportAllocs()
			b.SetBytes(256)
			b.ResetTimer()
			for sent := 0; sent < b.N; {
				batch := tlps[:min(burst, b.N-sent)]
				for len(batch) > 0 {
					var n int
					var err error
					if burst == 1 {
						if err = host.Send(batch[0]); err == nil {
							n = 1
						}
					} else {
						n, err = host.SendMany(batch)
					}
					batch, sent = batch[n:], sent+n
					if err != nil {
						if !errors.Is(err, bridge.ErrBusy) {
							b.Fatal(err)
						}
						waits++
						wait.Reset(100 * time.Microsecond)
						select {
						case <-host.Progress:
						case <-wait.C:
						}
					}
				}
			}
			host.SendHeld()
			waitfor.Progress(b, "delivering", func() (bool, uint64) {
				d := delivered.Load()
				return d >= int64(b.N), uint64(d)
			})
			b.StopTimer()
			hc, gc := host.Counters(), gpu.Counters()
			b.ReportMetric(float64(hc.FramesSent)/float64(b.N), "host_frames/op")
			b.ReportMetric(float64(gc.FramesSent)/float64(b.N), "gpu_frames/op")
			b.ReportMetric(float64(waits)/float64(b.N), "busy_waits/op")
		})
	}
}

// BenchmarkPolledRoundTrip is the busy-polling path of the wall-clock
// world: one goroutine (a spinning clock) hands a TLP to the host runner,
// polls the GPU runner until it got it, answers through the GPU runner,
// and polls the host runner until the answer is in, while the runners'
// goroutines leave their sockets to it. ns/op is one round trip; allocs/op
// must be 0 (nothing on the path allocates per TLP). Over sockets of
// udp.Listen (in the runtime's poller) and of udp.ListenBusyPoll; "held"
// is busypoll as package realtime runs it: HoldSends, TLPs from Poll to
// OnPolledTLP, what to send handed over by a batching QueuedSender, and a
// SendHeld after each turn.
func BenchmarkPolledRoundTrip(b *testing.B) {
	for _, k := range []struct {
		name   string
		listen func(local, peer netip.AddrPort) (*udp.Conn, error)
		held   bool
	}{{"listen", udp.Listen, false}, {"busypoll", udp.ListenBusyPoll, false}, {"held", udp.ListenBusyPoll, true}} {
		b.Run(k.name, func(b *testing.B) { polledRoundTrip(b, k.listen, k.held) })
	}
}

func polledRoundTrip(b *testing.B, listen func(local, peer netip.AddrPort) (*udp.Conn, error), held bool) {
	var there, back atomic.Int64
	hold := func(r *driver.Runner) {
		r.HoldSends = held
		if held {
			r.OnPolledTLP = r.OnTLP
		}
	}
	host, gpu, stop := udpPairOver(b, listen, &there, &back, hold)
	defer stop()
	queues := map[*driver.Runner]*driver.QueuedSender{}
	for _, r := range []*driver.Runner{host, gpu} {
		q := driver.NewQueuedSender(sim.New(1), r)
		q.Batch = true
		queues[r] = q
	}
	p := tlp.Packet{Kind: tlp.MWr, Addr64: true, FirstBE: 0xf, Address: 0x10_0000_0000, Data: make([]byte, 4)}
	w, err := p.AppendTo(nil)
	if err != nil {
		b.Fatal(err)
	}
	batch := [][]byte{w}
	// Spin, as the clock does; fail after a long time without the TLP.
	await := func(r *driver.Runner, n *atomic.Int64, want int64) {
		for spins, since := 0, time.Now(); n.Load() < want; spins++ {
			r.Poll()
			r.SendHeld()
			if spins%4096 == 4095 && time.Since(since) > waitfor.Stall {
				b.Fatalf("no TLP after %v of polling", waitfor.Stall)
			}
		}
	}
	send := func(r *driver.Runner) {
		if held {
			q := queues[r]
			q.SendTLP(w)
			for q.Flush() {
				r.Poll()
			}
			r.SendHeld()
			return
		}
		for {
			k, err := r.SendMany(batch)
			if k == 1 {
				return
			}
			if !errors.Is(err, bridge.ErrBusy) {
				b.Fatal(err)
			}
			r.Poll()
		}
	}
	b.ReportAllocs()
	for i := int64(1); b.Loop(); i++ {
		send(host)
		await(gpu, &there, i)
		send(gpu)
		await(host, &back, i)
	}
	host.PollIdle()
	gpu.PollIdle()
	b.ReportMetric(float64(host.Polled()+gpu.Polled())/float64(b.N), "polled_frames/op")
}

// BenchmarkRunnerBulk is a DMA burst: 512-byte posted writes handed over
// 256 at a time, which fill whole 9000-byte frames sent in one batch, over
// sockets that segment runs of equal frames (UDP GSO, as udp.Listen opens
// them) and over plain ones. ns/op and cpu-ns/op (the process's CPU time,
// steadier than the wall on a shared machine) are per TLP; allocs/op must
// be 0. The 16/ runs hand the TLPs over 16 at a time, as a PCIe port's
// bursts come: with SendMany each call sends a part-filled frame; with
// SendManyHeld (held) they go out in full frames, a few to a call.
// nogro: the receiving runner takes a datagram per frame, where by
// default it takes a segmented run as one message (UDP GRO).
func BenchmarkRunnerBulk(b *testing.B) {
	plain := func(local, peer netip.AddrPort) (*udp.Conn, error) {
		c, err := udp.Listen(local, peer)
		if err == nil {
			c.NoOffload()
		}
		return c, err
	}
	for _, k := range []struct {
		name   string
		listen func(local, peer netip.AddrPort) (*udp.Conn, error)
		batch  int
		held   bool
		noGRO  bool
	}{{"gso", udp.Listen, 256, false, false}, {"gso/nogro", udp.Listen, 256, false, true}, {"plain", plain, 256, false, false},
		{"16/gso", udp.Listen, 16, false, false}, {"16/gso/held", udp.Listen, 16, true, false}, {"16/gso/held/nogro", udp.Listen, 16, true, true}} {
		b.Run(k.name, func(b *testing.B) {
			if k.noGRO {
				transportOf = func(c *udp.Conn) driver.Transport { return noGRO{c} }
				defer func() { transportOf = func(c *udp.Conn) driver.Transport { return c } }()
			}
			var delivered atomic.Int64
			host, _, stop := udpPairOver(b, k.listen, &delivered, nil)
			defer stop()
			tlps := make([][]byte, k.batch)
			send := host.SendMany
			if k.held {
				send = host.SendManyHeld
			}
			for i := range tlps {
				p := tlp.Packet{Kind: tlp.MWr, Addr64: true, FirstBE: 0xf, LastBE: 0xf,
					Address: 0x10_0000_0000 + uint64(i)*512, Data: make([]byte, 512)}
				tlps[i], _ = p.AppendTo(nil)
			}
			wait := time.NewTimer(time.Hour)
			b.ReportAllocs()
			b.SetBytes(512)
			c0 := cpuTime()
			b.ResetTimer()
			for sent := 0; sent < b.N; {
				batch := tlps[:min(len(tlps), b.N-sent)]
				for len(batch) > 0 {
					n, err := send(batch)
					batch, sent = batch[n:], sent+n
					if err != nil {
						if !errors.Is(err, bridge.ErrBusy) {
							b.Fatal(err)
						}
						host.SendHeld()
						wait.Reset(100 * time.Microsecond)
						select {
						case <-host.Progress:
						case <-wait.C:
						}
					}
				}
			}
			// Nothing more is coming: what SendManyHeld left queued goes
			// now (without it the last part-filled frame waited for an
			// acknowledgement that may have come already: a stall, 2 runs
			// in 40).
			host.SendHeld()
			waitfor.Progress(b, "delivering", func() (bool, uint64) {
				d := delivered.Load()
				return d >= int64(b.N), uint64(d)
			})
			b.StopTimer()
			b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the process's user and system time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// With UDP GRO (the runner turns it on), full frames the host side sends
// in segmented runs reach the GPU side's runner as one message per run,
// and the runner hands the bridge every frame of it: all TLPs delivered,
// and every frame the host sent received as a frame of its own (a run fed
// to the bridge whole would count once, its later frames lost).
func TestRunnerGRO(t *testing.T) {
	var conns []*udp.Conn
	listen := func(local, peer netip.AddrPort) (*udp.Conn, error) {
		c, err := udp.Listen(local, peer)
		conns = append(conns, c)
		return c, err
	}
	var delivered atomic.Int64
	host, gpu, stop := udpPairOver(t, listen, &delivered, nil)
	defer stop()
	const n = 2048
	tlps := make([][]byte, 256)
	for i := range tlps {
		p := tlp.Packet{Kind: tlp.MWr, Addr64: true, FirstBE: 0xf, LastBE: 0xf,
			Address: 0x10_0000_0000 + uint64(i)*512, Data: make([]byte, 512)}
		tlps[i], _ = p.AppendTo(nil)
	}
	w := waitfor.NewWatch(t, "sending")
	for sent := 0; sent < n; {
		k, err := host.SendMany(tlps[:min(len(tlps), n-sent)])
		sent += k
		if err != nil {
			if !errors.Is(err, bridge.ErrBusy) {
				t.Fatal(err)
			}
			w.Wait(uint64(sent))
		}
	}
	if !waitfor.Settle(func() (bool, uint64) {
		d := delivered.Load()
		return d == n && gpu.Counters().FramesReceived == host.Counters().FramesSent, uint64(d)
	}) {
		t.Fatalf("delivered %d of %d; host sent %d frames, GPU side received %d (last frame error: %v)",
			delivered.Load(), n, host.Counters().FramesSent, gpu.Counters().FramesReceived, gpu.FrameError())
	}
	if c := conns[1].Coalesced(); c == 0 {
		t.Fatal("no message came coalesced: GRO off")
	}
}
