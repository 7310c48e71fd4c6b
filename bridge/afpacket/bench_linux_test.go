package afpacket

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/tlp"
)

// perFrame hides the batched calls of a Conn: the runner then sends and
// receives one frame per system call, as before batching.
type perFrame struct{ c *Conn }

func (p perFrame) Send(f []byte) error        { return p.c.Send(f) }
func (p perFrame) Recv(b []byte) (int, error) { return p.c.Recv(b) }
func (p perFrame) Close() error               { return p.c.Close() }
func (p perFrame) ForeignDropped() uint64     { return p.c.ForeignDropped() }

// blocking hides only the polled receive: the runner blocks in
// RecvBatch.
type blocking struct{ perFrame }

func (p blocking) SendBatch(f [][]byte) (int, error)          { return p.c.SendBatch(f) }
func (p blocking) RecvBatch(b [][]byte, s []int) (int, error) { return p.c.RecvBatch(b, s) }

// BenchmarkPairOverVeth runs a bridge pair over raw Ethernet on a veth
// (MTU 9000) and streams 256-byte posted writes one way: "batched" over
// the Conn as it ships (sendmmsg, recvmmsg, a polled receive), "perframe"
// over the same Conn with those hidden (a system call per frame, as
// before). Compare the two in one run: ns/op is per TLP.
func BenchmarkPairOverVeth(b *testing.B) {
	for _, c := range []struct {
		mode string
		mtu  int
	}{{"perframe", 1500}, {"blocking", 1500}, {"batched", 1500}, {"perframe", 9000}, {"blocking", 9000}, {"batched", 9000}} {
		mode := c.mode
		b.Run(fmt.Sprintf("mtu%d/%s", c.mtu, mode), func(b *testing.B) {
			ha, ga := vethPair(b)
			var ht, gt driver.Transport = ha, ga
			switch mode {
			case "perframe":
				ht, gt = perFrame{ha}, perFrame{ga}
			case "blocking":
				ht, gt = blocking{perFrame{ha}}, blocking{perFrame{ga}}
			}
			cfg := bridge.Config{MTU: c.mtu, Keepalive: 100 * time.Millisecond, DeadAfter: 5 * time.Second}
			hc, gc := cfg, cfg
			hc.Role, gc.Role = bridge.RoleHost, bridge.RoleGPU
			hb, err := bridge.New(hc)
			if err != nil {
				b.Fatal(err)
			}
			gb, err := bridge.New(gc)
			if err != nil {
				b.Fatal(err)
			}
			host, gpu := driver.New(hb, ht), driver.New(gb, gt)
			var got atomic.Int64
			gpu.OnTLP = func(tlp.View) { got.Add(1) }
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for _, r := range []*driver.Runner{host, gpu} {
				wg.Add(1)
				go func() { defer wg.Done(); _ = r.Run(ctx) }()
			}
			defer func() { cancel(); wg.Wait() }()
			waitfor.Until(b, "link up over the veth pair", func() bool {
				return host.State() == bridge.StateUp && gpu.State() == bridge.StateUp
			})
			const batch = 64
			tlps := make([][]byte, batch)
			for i := range tlps {
				p := tlp.Packet{Kind: tlp.MWr, Addr64: true, FirstBE: 0xf, LastBE: 0xf, Address: uint64(i) * 4096, Data: make([]byte, 256)}
				tlps[i], _ = p.AppendTo(nil)
			}
			b.ReportAllocs()
			b.SetBytes(256)
			b.ResetTimer()
			cpu0 := cpuTime()
			sent := 0
			for sent < b.N {
				rest := tlps[:min(batch, b.N-sent)]
				for len(rest) > 0 {
					n, err := host.SendMany(rest)
					rest, sent = rest[n:], sent+n
					if errors.Is(err, bridge.ErrBusy) {
						<-host.Progress
					} else if err != nil {
						b.Fatal(err)
					}
				}
			}
			for got.Load() < int64(b.N) {
				if c := host.Counters().LinkDowns + gpu.Counters().LinkDowns; c != 0 {
					b.Fatalf("the link went down %d times", c)
				}
				time.Sleep(50 * time.Microsecond)
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
			hcs := host.Counters()
			b.ReportMetric(float64(hcs.TLPsSent)/float64(max(1, hcs.FramesSent)), "tlps/frame")
			b.ReportMetric(float64(gpu.Counters().FramesSent), "acks")
		})
	}
}

// cpuTime returns the CPU time this process used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
