package afxdp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mdlayher/packet"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/afpacket"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/udp"
	"github.com/dxpu/dxpu/internal/frametest"
	"github.com/dxpu/dxpu/internal/netns"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/tlp"
)

// vethMTU stays under veth's limit for native XDP (about 3506).
const vethMTU = 3500

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Frames: 6}, "power of two"},
		{Config{Frames: 2}, "at least 4"},
		{Config{Queue: MaxQueues}, "queue 64"},
	} {
		if err := tc.cfg.defaults(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error about %s", tc.cfg, err, tc.want)
		}
	}
	if _, err := Listen("dxpu-no-such0", net.HardwareAddr{2, 0, 0, 0, 0, 1}, Config{}); err == nil || !strings.Contains(err.Error(), "dxpu-no-such0") {
		t.Errorf("missing interface: %v", err)
	}
	if _, err := Listen("lo", net.HardwareAddr{2, 0, 0}, Config{}); err == nil || !strings.Contains(err.Error(), "6-byte MAC") {
		t.Errorf("short MAC: %v", err)
	}
	var c Conn
	if _, err := c.RecvBatch(nil, nil); err == nil || !strings.Contains(err.Error(), "0 buffers") {
		t.Errorf("no buffers: %v", err)
	}
	if _, err := c.RecvBatch(make([][]byte, 2), make([]int, 1)); err == nil || !strings.Contains(err.Error(), "1 sizes") {
		t.Errorf("too few sizes: %v", err)
	}
}

// payload takes the dxpu part of a frame from the peer behind at most two
// tags and counts every other frame without panicking.
func TestPayload(t *testing.T) {
	peer := [6]byte{2, 0, 0, 0, 0, 1}
	c := &Conn{peer: peer}
	eth := func(src [6]byte, rest ...byte) []byte {
		return append(append([]byte{2, 0, 0, 0, 0, 2}, src[:]...), rest...)
	}
	buf := make([]byte, 8)
	for _, tc := range []struct {
		frame []byte
		want  string // payload, or the counter that moves
	}{
		{eth(peer, 0x88, 0xb5, 'h', 'i'), "hi"},
		{eth(peer, 0x81, 0x00, 0, 5, 0x88, 0xb5, 'v'), "v"},
		{eth(peer, 0x88, 0xa8, 0, 7, 0x81, 0x00, 0, 5, 0x88, 0xb5, 'w'), "w"},
		{eth(peer, 0x81, 0x00, 0, 5, 0x81, 0x00, 0, 5, 0x81, 0x00, 0, 5, 0x88, 0xb5), "malformed"},
		{eth(peer, 0x88, 0xb5), ""},
		{eth(peer, 0x08, 0x00, 'x'), "malformed"},
		{eth(peer, 0x81, 0x00, 0), "malformed"},
		{eth(peer, 0x88), "malformed"},
		{eth(peer)[:5], "malformed"},
		{nil, "malformed"},
		{eth([6]byte{2, 0, 0, 0, 0, 9}, 0x88, 0xb5, 'x'), "foreign"},
		{eth(peer, 0x88, 0xb5, 1, 2, 3, 4, 5, 6, 7, 8, 9), "oversize"},
	} {
		before := c.Stats()
		n, ok := c.payload(tc.frame, buf)
		after := c.Stats()
		var got string
		switch {
		case ok:
			got = string(buf[:n])
		case after.Malformed > before.Malformed:
			got = "malformed"
		case after.Foreign > before.Foreign:
			got = "foreign"
		case after.Oversize > before.Oversize:
			got = "oversize"
		}
		if got != tc.want {
			t.Errorf("% x: got %q, want %q", tc.frame, got, tc.want)
		}
	}
}

// pair is a veth pair between two fresh namespaces, addressed for UDP.
type pair struct {
	ns   [2]*netns.NS
	ifs  [2]netns.Iface
	addr [2]netip.Addr
}

func newPair(t testing.TB) *pair {
	privtest.NetNS(t)
	privtest.BPF(t)
	p := &pair{addr: [2]netip.Addr{netip.MustParseAddr("10.99.0.1"), netip.MustParseAddr("10.99.0.2")}}
	for i := range p.ns {
		ns, err := netns.New(fmt.Sprintf("xsk%d", i))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ns.Close() })
		p.ns[i] = ns
	}
	var err error
	p.ifs[0], p.ifs[1], err = p.ns[0].AddVeth(netns.VethEnd{Name: "xa", Addr: netip.PrefixFrom(p.addr[0], 24)},
		p.ns[1], netns.VethEnd{Name: "xb", Addr: netip.PrefixFrom(p.addr[1], 24)}, vethMTU)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// transport kinds a side of the pair runs.
const (
	kindXDP    = "afxdp"
	kindPacket = "afpacket"
	kindUDP    = "udp"
)

// open opens side i's transport of kind, inside its namespace.
func (p *pair) open(t testing.TB, i int, kind string, cfg Config) driver.Transport {
	var tr driver.Transport
	err := p.ns[i].Do(func() error {
		var err error
		peer := p.ifs[1-i].MAC
		switch kind {
		case kindXDP:
			var c *Conn
			c, err = Listen(p.ifs[i].Name, peer, cfg)
			if err == nil {
				t.Logf("side %d: %s", i, c.Mode())
				tr = c
			}
		case kindPacket:
			tr, err = afpacket.Listen(p.ifs[i].Name, peer)
		case kindUDP:
			tr, err = udp.Listen(netip.AddrPortFrom(p.addr[i], 7101), netip.AddrPortFrom(p.addr[1-i], 7101))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// Frames of every size up to the MTU cross the pair byte for byte, in
// order, both ways, AF_XDP against AF_PACKET and against AF_XDP; the
// AF_XDP side has 8 RX and 8 TX frames, so the traffic only gets through
// when received frames go back to the fill ring and sent ones come back
// from the completion ring.
func TestFramesByteExact(t *testing.T) {
	for _, other := range []string{kindPacket, kindXDP} {
		t.Run("afxdp-"+other, func(t *testing.T) {
			p := newPair(t)
			a := p.open(t, 0, kindXDP, Config{Frames: 16})
			b := p.open(t, 1, other, Config{Frames: 16})
			exchange(t, a, b, 400)
			exchange(t, b, a, 400)
			if s := a.(*Conn).Stats(); s != (Stats{}) {
				t.Errorf("drops: %+v", s)
			}
		})
	}
}

// exchange sends n frames from one to the other, one at a time (the
// receiver confirms each, so nothing is lost to a full queue), and checks
// each byte. A receiver that stops getting frames fails the test.
func exchange(t *testing.T, from, to driver.Transport, n int) {
	t.Helper()
	got := make(chan []byte, 1)
	go func() {
		buf := make([]byte, 65536)
		for {
			k, err := to.Recv(buf)
			if err != nil {
				return // closed at the test's end
			}
			got <- append([]byte(nil), buf[:k]...)
		}
	}()
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	for i := range n {
		frame := make([]byte, 1+rng.IntN(vethMTU))
		if i == 0 {
			frame = frame[:1]
		}
		if i == 1 {
			frame = make([]byte, vethMTU)
		}
		for j := range frame {
			frame[j] = byte(rng.Uint32())
		}
		if err := from.Send(frame); err != nil {
			t.Fatalf("frame %d (%d bytes): %v", i, len(frame), err)
		}
		var g []byte
		waitfor.Until(t, fmt.Sprintf("frame %d to arrive", i), func() bool {
			select {
			case g = <-got:
				return true
			default:
				return false
			}
		})
		// AF_PACKET pads short frames to the Ethernet minimum.
		if len(g) < len(frame) || !bytes.Equal(g[:len(frame)], frame) {
			t.Fatalf("frame %d: sent %d bytes % x..., got %d bytes % x...", i, len(frame), frame[:min(16, len(frame))], len(g), g[:min(16, len(g))])
		}
	}
}

// Frames behind VLAN tags arrive without them; frames too large for the
// buffer are counted, not delivered.
func TestTagsAndDrops(t *testing.T) {
	p := newPair(t)
	a := p.open(t, 0, kindXDP, Config{}).(*Conn)
	var b *afpacket.Conn
	if err := p.ns[1].Do(func() (err error) {
		b, err = afpacket.ListenTagging(p.ifs[1].Name, p.ifs[0].MAC)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	buf := make([]byte, 100)
	if err := b.SendTagged([]byte("one tag"), 0x8100_0005); err != nil {
		t.Fatal(err)
	}
	if err := b.SendTagged([]byte("two tags"), 0x88a8_0007, 0x8100_0005); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"one tag", "two tags"} {
		n, err := a.Recv(buf)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(buf[:min(n, len(want))]); got != want {
			t.Fatalf("got %q, want %q", buf[:n], want)
		}
	}
	// Too large for the buffer, then a good one: only the latter arrives.
	if err := b.Send(make([]byte, 200)); err != nil {
		t.Fatal(err)
	}
	if err := b.Send([]byte("fits")); err != nil {
		t.Fatal(err)
	}
	n, err := a.Recv(buf)
	if err != nil || string(buf[:4]) != "fits" {
		t.Fatalf("got %q, %v", buf[:n], err)
	}
	if s := a.Stats(); s.Oversize != 1 {
		t.Fatalf("stats %+v, want 1 oversize", s)
	}
	if err := a.Send(make([]byte, a.MTU()+1)); err == nil || !strings.Contains(err.Error(), "exceeds the MTU") {
		t.Fatalf("oversize send: %v", err)
	}
}

// Frames from another MAC than the peer's, which the socket drops
// (Stats.Foreign), are what the runner exports as
// bridge.Counters.DroppedForeignSource (the bridge's
// dxpu_bridge_dropped_foreign_source_total), as over UDP and AF_PACKET:
// they were counted in Stats and exported nowhere. The peer's frames still
// reach the bridge, and none of the strangers' HELLOs is taken.
func TestForeignFramesCounted(t *testing.T) {
	p := newPair(t)
	a := p.open(t, 0, kindXDP, Config{}).(*Conn)
	peer := p.open(t, 1, kindPacket, Config{})
	var raw *packet.Conn
	if err := p.ns[1].Do(func() error {
		ifi, err := net.InterfaceByName(p.ifs[1].Name)
		if err != nil {
			return err
		}
		raw, err = packet.Listen(ifi, packet.Raw, 0, nil) // bound to no EtherType: it receives nothing
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	const pair, strangers, each = 7, 3, 4
	r := frametest.HostRunner(t, pair, a)
	to := p.ifs[0].MAC
	hello := frametest.SendStrangers(t, pair, strangers, each, func(src net.HardwareAddr, f []byte) error {
		_, err := raw.WriteTo(frametest.Ethernet(to, src, f), &packet.Addr{HardwareAddr: to})
		return err
	})
	// The peer's own frame, cut short: it reaches the bridge, which drops
	// it as malformed.
	if err := peer.Send(hello[:12]); err != nil {
		t.Fatal(err)
	}
	frametest.AwaitForeignCounted(t, r, strangers*each, func() uint64 { return a.Stats().Foreign })
}

var _ interface {
	driver.BatchSender
	driver.BatchReceiver
	driver.Poller
} = (*Conn)(nil)

// Poller: TryRecvBatch takes nothing from an empty ring without waiting;
// WaitReadable returns once a frame is there and leaves it to
// TryRecvBatch; Close ends a wait.
func TestPoller(t *testing.T) {
	p := newPair(t)
	a := p.open(t, 0, kindXDP, Config{}).(*Conn)
	b := p.open(t, 1, kindXDP, Config{}).(*Conn)
	bufs, sizes := [][]byte{make([]byte, 100), make([]byte, 100)}, make([]int, 2)
	if n, err := a.TryRecvBatch(bufs, sizes); n != 0 || err != nil {
		t.Fatalf("empty ring: %d frames, %v", n, err)
	}
	if _, err := b.SendBatch([][]byte{[]byte("one"), []byte("two")}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 2 {
		if err := a.WaitReadable(); err != nil {
			t.Fatal(err)
		}
		n, err := a.TryRecvBatch(bufs, sizes)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			got = append(got, string(bufs[i][:sizes[i]]))
		}
	}
	if got[0] != "one" || got[1] != "two" {
		t.Fatalf("got %q", got)
	}
	errc := make(chan error, 1)
	go func() { errc <- a.WaitReadable() }()
	// Whether or not the wait began before Close, it ends with ErrClosed.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitReadable after Close: %v", err)
	}
	if _, err := a.TryRecvBatch(bufs, sizes); !errors.Is(err, ErrClosed) {
		t.Fatalf("TryRecvBatch after Close: %v", err)
	}
}

// Close unblocks a Recv waiting for a frame, and calls after it fail.
func TestCloseUnblocksRecv(t *testing.T) {
	p := newPair(t)
	a := p.open(t, 0, kindXDP, Config{})
	errc := make(chan error, 1)
	var started atomic.Bool
	go func() {
		started.Store(true)
		_, err := a.Recv(make([]byte, 100))
		errc <- err
	}()
	waitfor.Until(t, "the receiver to start", started.Load)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("Recv after Close: %v", err)
	}
	if err := a.Send([]byte{1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Send after Close: %v", err)
	}
}

// Two bridges, one over AF_XDP and the other over AF_PACKET (and both over
// AF_XDP), move posted writes byte for byte and in order, and answer
// reads. The AF_XDP sides have 8 RX and 8 TX frames: hundreds of frames
// get through only when both rings are recycled.
func TestBridgePair(t *testing.T) {
	for _, kinds := range [][2]string{{kindXDP, kindPacket}, {kindPacket, kindXDP}, {kindXDP, kindXDP}} {
		t.Run(kinds[0]+"-"+kinds[1], func(t *testing.T) {
			p := newPair(t)
			host, gpu := runPair(t, p.open(t, 0, kinds[0], Config{Frames: 16}), p.open(t, 1, kinds[1], Config{Frames: 16}), vethMTU)
			var mu sync.Mutex
			var got [][]byte
			gpu.r.OnTLP = func(v tlp.View) {
				if v.Kind() == tlp.MWr {
					mu.Lock()
					got = append(got, append([]byte(nil), v...))
					mu.Unlock()
				}
			}
			host.start()
			gpu.start()
			waitfor.Until(t, "link up", func() bool { return host.r.State() == bridge.StateUp && gpu.r.State() == bridge.StateUp })
			const n = 3000
			var sent [][]byte
			rng := rand.New(rand.NewPCG(2, 3))
			w := waitfor.NewWatch(t, "writes accepted")
			for i := 0; i < n; {
				data := make([]byte, 4*(2+rng.IntN(63))) // 8 to 256 bytes
				for j := range data {
					data[j] = byte(rng.Uint32())
				}
				pk := tlp.Packet{Kind: tlp.MWr, Addr64: true, FirstBE: 0xf, LastBE: 0xf, Address: uint64(i) << 12, Data: data}
				raw, err := pk.AppendTo(nil)
				if err != nil {
					t.Fatal(err)
				}
				switch err := host.r.Send(raw); {
				case err == nil:
					sent = append(sent, raw)
					i++
				case errors.Is(err, bridge.ErrBusy):
					w.Wait(gpu.r.Counters().TLPsDelivered)
				default:
					t.Fatalf("write %d: %v", i, err)
				}
			}
			waitfor.Progress(t, "writes delivered", func() (bool, uint64) {
				mu.Lock()
				defer mu.Unlock()
				return len(got) >= n, uint64(len(got))
			})
			mu.Lock()
			defer mu.Unlock()
			for i := range sent {
				if !bytes.Equal(got[i], sent[i]) {
					t.Fatalf("write %d arrived as % x, sent % x", i, got[i][:16], sent[i][:16])
				}
			}
			if d := host.r.Counters().LinkDowns + gpu.r.Counters().LinkDowns; d != 0 {
				t.Fatalf("the link went down %d times", d)
			}
			hc := host.r.Counters()
			t.Logf("host: %d frames, %d TLPs, %d retransmits", hc.FramesSent, hc.TLPsSent, hc.Retransmits)
		})
	}
}

// side is one bridge of a pair on its runner.
type side struct {
	r     *driver.Runner
	start func()
}

// runPair makes a host and a GPU bridge over the two transports; start
// runs each (stopped at the test's end).
func runPair(t testing.TB, ht, gt driver.Transport, mtu int) (side, side) {
	// Timers for a loaded machine (see bridge/afpacket's pair test).
	cfg := bridge.Config{MTU: mtu, Keepalive: 100 * time.Millisecond, DeadAfter: 5 * time.Second}
	var sides [2]side
	for i, tr := range []driver.Transport{ht, gt} {
		c := cfg
		c.Role = []bridge.Role{bridge.RoleHost, bridge.RoleGPU}[i]
		b, err := bridge.New(c)
		if err != nil {
			t.Fatal(err)
		}
		r := driver.New(b, tr)
		sides[i] = side{r: r, start: func() {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = r.Run(ctx) }()
			t.Cleanup(func() { cancel(); <-done })
		}}
	}
	return sides[0], sides[1]
}

// Sending and receiving allocate nothing, one frame or a batch at a time.
func TestHotPathAllocatesNothing(t *testing.T) {
	p := newPair(t)
	a := p.open(t, 0, kindXDP, Config{}).(*Conn)
	b := p.open(t, 1, kindXDP, Config{}).(*Conn)
	frames := [][]byte{make([]byte, 1000), make([]byte, 64), make([]byte, vethMTU)}
	bufs, sizes := [][]byte{make([]byte, vethMTU), make([]byte, vethMTU), make([]byte, vethMTU)}, make([]int, 3)
	allocs := testing.AllocsPerRun(200, func() {
		if err := a.Send(frames[0]); err != nil {
			t.Fatal(err)
		}
		if n, err := b.Recv(bufs[0]); err != nil || n != len(frames[0]) {
			t.Fatalf("got %d bytes, %v", n, err)
		}
		if n, err := b.SendBatch(frames); err != nil || n != len(frames) {
			t.Fatalf("sent %d, %v", n, err)
		}
		for got := 0; got < len(frames); {
			n, err := a.RecvBatch(bufs[got:], sizes[got:])
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per round", allocs)
	}
}

// FuzzPayload: any frame is taken or counted, never a panic, and what is
// taken fits the buffer.
func FuzzPayload(f *testing.F) {
	f.Add([]byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x81, 0x00, 0, 5, 0x88, 0xb5, 'x'}, 4)
	f.Add([]byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88}, 0)
	f.Fuzz(func(t *testing.T, frame []byte, size int) {
		c := &Conn{peer: [6]byte{2, 0, 0, 0, 0, 1}}
		buf := make([]byte, size&0xfff)
		n, ok := c.payload(frame, buf)
		s := c.Stats()
		if ok && (n > len(buf) || n > len(frame)-ethHeader) || !ok && s.Foreign+s.Malformed+s.Oversize != 1 {
			t.Fatalf("% x into %d bytes: %d, %v, %+v", frame, len(buf), n, ok, s)
		}
	})
}
