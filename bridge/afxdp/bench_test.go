package afxdp

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/udp"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/tlp"
)

// kindUDPNoGSO is UDP without segmentation offload (udp.Conn.NoOffload):
// a datagram per frame, as AF_XDP and AF_PACKET send.
const kindUDPNoGSO = "udp-nogso"

// udpHeaders is what IPv4 and UDP take of a veth frame's MTU.
const udpHeaders = 28

// BenchmarkVethGoodput measures, in one run over one veth pair between two
// namespaces (one per iteration count), what each transport moves:
//
//	bridge/KIND  a lossless bridge pair, 256-byte posted writes, host to GPU
//	raw/KIND     the transport alone: MTU-sized frames, at most 256 in flight
//
// KIND is afxdp, afpacket, udp (bridge/udp's sockets: sendmmsg,
// recvmmsg, UDP GSO and GRO, the datagram one MTU less the IP and UDP
// headers) or udp-nogso (the same, a datagram per frame); raw/udp is
// rawgoodput's plain-socket baseline (a datagram per message). The
// figure is goodput_gbps; bridge runs report TLPs/frame, raw runs
// lost_pct.
//
//	go test -run '^$' -bench VethGoodput -benchmem ./bridge/afxdp
func BenchmarkVethGoodput(b *testing.B) {
	for _, kind := range []string{kindXDP, kindPacket, kindUDP, kindUDPNoGSO} {
		b.Run("bridge/"+kind, func(b *testing.B) { benchBridge(b, kind) })
	}
	for _, kind := range []string{kindXDP, kindPacket, kindUDP} {
		b.Run("raw/"+kind, func(b *testing.B) { benchRaw(b, kind) })
	}
}

func mtuOf(kind string) int {
	if kind == kindUDP {
		return vethMTU - udpHeaders
	}
	return vethMTU
}

func benchBridge(b *testing.B, kind string) {
	p := newPair(b)
	nooff := kind == kindUDPNoGSO
	if nooff {
		kind = kindUDP
	}
	ht, gt := p.open(b, 0, kind, Config{}), p.open(b, 1, kind, Config{})
	if nooff {
		ht.(*udp.Conn).NoOffload()
		gt.(*udp.Conn).NoOffload()
	}
	host, gpu := runPair(b, ht, gt, mtuOf(kind))
	var delivered atomic.Uint64
	gpu.r.OnTLP = func(v tlp.View) {
		if v.Kind() == tlp.MWr {
			delivered.Add(1)
		}
	}
	host.start()
	gpu.start()
	waitfor.Until(b, "link up", func() bool { return host.r.State() == bridge.StateUp && gpu.r.State() == bridge.StateUp })
	const size = 256
	pk := tlp.Packet{Kind: tlp.MWr, Addr64: true, FirstBE: 0xf, LastBE: 0xf, Address: 1 << 32, Data: make([]byte, size)}
	raw, err := pk.AppendTo(nil)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; {
		switch err := host.r.Send(raw); {
		case err == nil:
			i++
		case errors.Is(err, bridge.ErrBusy):
			select {
			case <-host.r.Progress:
			case <-time.After(10 * time.Millisecond): // a retransmission's turn
			}
		default:
			b.Fatalf("write %d: %v", i, err)
		}
	}
	waitfor.Progress(b, "writes delivered", func() (bool, uint64) {
		d := delivered.Load()
		return d >= uint64(b.N), d
	})
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)*size*8/el.Seconds()/1e9, "goodput_gbps")
	c := host.r.Counters()
	b.ReportMetric(float64(c.Retransmits), "retransmits")
	b.ReportMetric(float64(c.TLPsSent)/float64(c.FramesSent), "TLPs/frame")
}

func benchRaw(b *testing.B, kind string) {
	p := newPair(b)
	tx, rx := p.open(b, 0, kind, Config{}), p.open(b, 1, kind, Config{})
	mtu := mtuOf(kind)
	if kind == kindUDP {
		// A datagram per message, as rawgoodput's baseline (dxpu bench
		// link's udp_goodput_gbps) sends: a plain socket's figure.
		tx.(*udp.Conn).NoOffload()
		rx.(*udp.Conn).NoOffload()
	}
	const window, batch = 256, 32
	var got, gotBytes atomic.Uint64
	go func() {
		bufs, sizes := make([][]byte, batch), make([]int, batch)
		for i := range bufs {
			bufs[i] = make([]byte, 65536)
		}
		recv := func(bufs [][]byte, sizes []int) (int, error) {
			n, err := rx.Recv(bufs[0])
			sizes[0] = n
			return 1, err
		}
		if br, ok := rx.(driver.BatchReceiver); ok {
			recv = br.RecvBatch
		}
		for {
			n, err := recv(bufs, sizes)
			if err != nil {
				return // closed at the end
			}
			for _, s := range sizes[:n] {
				gotBytes.Add(uint64(s))
			}
			got.Add(uint64(n))
		}
	}()
	frames := make([][]byte, batch)
	for i := range frames {
		frames[i] = make([]byte, mtu)
	}
	send := func(frames [][]byte) (int, error) {
		for i, f := range frames {
			if err := tx.Send(f); err != nil {
				return i, err
			}
		}
		return len(frames), nil
	}
	if bs, ok := tx.(driver.BatchSender); ok {
		send = bs.SendBatch
	}
	b.SetBytes(int64(mtu))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	sent, lost := 0, 0
	stalled := time.Time{}
	for sent < b.N {
		// At most window frames in flight; frames a full queue dropped
		// are written off once nothing arrives for 20 ms.
		if out := sent - int(got.Load()) - lost; out+batch > window {
			if stalled.IsZero() {
				stalled = time.Now()
			} else if time.Since(stalled) > 20*time.Millisecond {
				lost += out
				stalled = time.Time{}
			}
			time.Sleep(20 * time.Microsecond) // leave the cores to the transport
			continue
		}
		stalled = time.Time{}
		n, err := send(frames[:min(batch, b.N-sent)])
		if err != nil {
			b.Fatalf("send: %v", err)
		}
		sent += n
	}
	// The tail: until everything arrived or nothing has for 20 ms.
	last, lastAt := got.Load(), time.Now()
	for {
		g := got.Load()
		if int(g) >= sent {
			lastAt = time.Now()
			break
		}
		if g != last {
			last, lastAt = g, time.Now()
		} else if time.Since(lastAt) > 20*time.Millisecond {
			break
		}
		time.Sleep(20 * time.Microsecond)
	}
	el := lastAt.Sub(start)
	b.StopTimer()
	g := got.Load()
	b.ReportMetric(float64(gotBytes.Load())*8/el.Seconds()/1e9, "goodput_gbps")
	b.ReportMetric(100*float64(sent-int(g))/float64(sent), "lost_pct")
}
