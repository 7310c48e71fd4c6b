package switching_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/internal/switchtest"
	"github.com/dxpu/dxpu/internal/syncbuf"
	"github.com/dxpu/dxpu/tlp/encap"
)

// udpRig is a UDP driver relaying for pairs of loopback sockets: pair i
// (ID 100+i) joins hosts[i] and gpus[i].
type udpRig struct {
	fwd        *switching.Forwarder
	drv        *switching.UDPDriver
	sw         *net.UDPAddr // where the endpoints send
	hosts      []*net.UDPConn
	gpus       []*net.UDPConn
	runErr     chan error
	cancel     context.CancelFunc
	mu         sync.Mutex
	slowPathed [][]byte // what SlowPath saw, in order
	slowFrom   []netip.AddrPort
}

func listenLoopback(t testing.TB) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetReadBuffer(4 << 20)
	return c
}

func pairID(i int) uint32 { return uint32(100 + i) }

// newUDPRig makes a driver listening on listen (batched, or the portable
// loop with perDatagram) for n pairs; extra rules are added as they are.
// start runs it: datagrams sent before wait in its socket, so that the
// first receive takes a full batch.
func newUDPRig(t testing.TB, listen string, perDatagram bool, n int, log *slog.Logger, extra ...switching.Rule) *udpRig {
	t.Helper()
	r := &udpRig{fwd: switching.NewForwarder(0), runErr: make(chan error, 1)}
	tbl := &table.Table{Version: 1}
	for i := range n {
		h, g := listenLoopback(t), listenLoopback(t)
		r.hosts, r.gpus = append(r.hosts, h), append(r.gpus, g)
		ha, ga := h.LocalAddr().(*net.UDPAddr).AddrPort(), g.LocalAddr().(*net.UDPAddr).AddrPort()
		tbl.Pairs = append(tbl.Pairs, table.Pair{ID: pairID(i),
			Host: table.Endpoint{Port: "udp", MAC: switchtest.MAC(1, byte(i)), IP: ha.Addr(), UDPPort: ha.Port()},
			GPU:  table.Endpoint{Port: "udp", MAC: switchtest.MAC(2, byte(i)), IP: ga.Addr(), UDPPort: ga.Port()}})
	}
	rules, _, err := switching.Compile(tbl, switching.SyntheticPorts([]string{"udp"}), 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rules {
		for d := range rules[i].Dir {
			rules[i].Dir[d].InPort, rules[i].Dir[d].OutPort = switching.UDPIndex, switching.UDPIndex
		}
	}
	r.fwd.SetPorts(map[string]switching.Port{"udp": {Name: "udp", Index: switching.UDPIndex}})
	r.fwd.Update(append(rules, extra...))
	r.drv, err = switching.NewUDPDriver(r.fwd, listen)
	if err != nil {
		t.Fatal(err)
	}
	if perDatagram {
		switching.UDPPerDatagram(r.drv)
	}
	r.drv.Log = log
	r.drv.SlowPath = func(from netip.AddrPort, payload []byte) {
		r.mu.Lock()
		r.slowPathed = append(r.slowPathed, append([]byte(nil), payload...))
		r.slowFrom = append(r.slowFrom, from)
		r.mu.Unlock()
	}
	r.sw = &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(r.drv.Addr().Port())}
	t.Cleanup(func() { r.drv.Close(); r.stop(t) })
	return r
}

func (r *udpRig) start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.runErr <- r.drv.Run(ctx) }()
}

// stop ends Run and checks that it ended cleanly (once).
func (r *udpRig) stop(t testing.TB) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.runErr:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("Run did not return 10s after its context ended")
	}
}

// testDatagram is datagram seq of source src: a dxpu header of pair id
// and type typ, then src, seq and bytes that depend on both, size bytes
// in all.
func testDatagram(typ encap.MsgType, id uint32, src, seq, size int) []byte {
	b := make([]byte, size)
	h := encap.Header(b)
	h.SetVersionFlags(encap.Version, 0)
	h.SetType(typ)
	h.SetPairID(id)
	b[encap.HeaderLen] = byte(src)
	binary.BigEndian.PutUint32(b[encap.HeaderLen+1:], uint32(seq))
	for k := encap.HeaderLen + 5; k < size; k++ {
		b[k] = byte(src*31 + seq*7 + k)
	}
	return b
}

// TestUDPDriverRelaysBursts sends bursts bigger than a batch from several
// sources to several destinations at once, of many sizes, with CONTROL
// datagrams (slow path, relayed), datagrams of an unknown pair (slow path,
// dropped) and spoofed ones (dropped) mixed in: every relayed datagram
// arrives intact, once, from the switch's address, at its own
// destination, in its source's order; SlowPath sees the slow-path ones
// intact in order; the counters match. Over an IPv4 and a dual-stack IPv6
// socket, batched and with the portable loop.
func TestUDPDriverRelaysBursts(t *testing.T) {
	for _, listen := range []string{"127.0.0.1:0", ":0"} {
		for _, perDatagram := range []bool{false, true} {
			name := listen + "/batched"
			if perDatagram {
				name = listen + "/perdatagram"
			}
			t.Run(name, func(t *testing.T) { relayBursts(t, listen, perDatagram) })
		}
	}
}

func relayBursts(t *testing.T, listen string, perDatagram bool) {
	const (
		pairs  = 3
		rounds = 6
		perSrc = 12 // per source and round: 6 sources make 72 a round
	)
	r := newUDPRig(t, listen, perDatagram, pairs, nil)
	// Source s: pair s/2's host (even s) or GPU (odd); it sends to the
	// other end.
	src := func(s int) *net.UDPConn {
		if s%2 == 0 {
			return r.hosts[s/2]
		}
		return r.gpus[s/2]
	}
	dst := func(s int) *net.UDPConn {
		if s%2 == 0 {
			return r.gpus[s/2]
		}
		return r.hosts[s/2]
	}
	const sources = 2 * pairs
	var wantSlow [][]byte
	var wantSlowFrom []netip.AddrPort
	relayed := [sources]int{}
	var spoofed, unknown int
	buf := make([]byte, 2048)
	seq := 0
	for round := range rounds {
		var want [sources][][]byte
		for k := range perSrc {
			for s := range sources {
				seq++
				size := encap.HeaderLen + 5 + (seq*131+s*17)%1300
				typ, id := encap.MsgTLP, pairID(s/2)
				switch {
				case k%5 == 2:
					typ = encap.MsgControl
				case k%7 == 3:
					id = 999 // unknown: slow path, then dropped
				case k%11 == 4:
					id = pairID((s/2 + 1) % pairs) // another pair's ID: spoofed
				}
				d := testDatagram(typ, id, s, seq, size)
				if _, err := src(s).WriteToUDP(d, r.sw); err != nil {
					t.Fatal(err)
				}
				from := src(s).LocalAddr().(*net.UDPAddr).AddrPort()
				switch {
				case id == 999:
					unknown++
				case id != pairID(s/2):
					spoofed++
					continue
				}
				if typ == encap.MsgControl || id == 999 {
					wantSlow = append(wantSlow, d)
					wantSlowFrom = append(wantSlowFrom, from)
				}
				if id == pairID(s/2) {
					want[s] = append(want[s], d)
					relayed[s]++
				}
			}
		}
		if round == 0 {
			r.start()
		}
		for s := range sources {
			c := dst(s)
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			for i, w := range want[s] {
				n, from, err := c.ReadFromUDPAddrPort(buf)
				if err != nil {
					t.Fatalf("round %d: source %d's datagram %d of %d: %v", round, s, i, len(want[s]), err)
				}
				if from.Port() != r.drv.Addr().Port() || from.Addr().Unmap() != netip.AddrFrom4([4]byte{127, 0, 0, 1}) {
					t.Fatalf("round %d: source %d's datagram %d came from %v, not the switch (%v)", round, s, i, from, r.drv.Addr())
				}
				if !bytes.Equal(buf[:n], w) {
					got := "?"
					if n >= encap.HeaderLen+5 {
						got = fmt.Sprintf("source %d seq %d", buf[encap.HeaderLen], binary.BigEndian.Uint32(buf[encap.HeaderLen+1:]))
					}
					t.Fatalf("round %d: destination of source %d got %d bytes (%s), want its datagram %d: %d bytes seq %d",
						round, s, n, got, i, len(w), binary.BigEndian.Uint32(w[encap.HeaderLen+1:]))
				}
			}
		}
	}
	// A last datagram from each source: it must be the next thing each
	// destination sees (nothing spoofed or unknown was relayed before it).
	for s := range sources {
		seq++
		d := testDatagram(encap.MsgTLP, pairID(s/2), s, seq, 100)
		if _, err := src(s).WriteToUDP(d, r.sw); err != nil {
			t.Fatal(err)
		}
		relayed[s]++
		c := dst(s)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, _, err := c.ReadFromUDPAddrPort(buf)
		if err != nil || !bytes.Equal(buf[:n], d) {
			t.Fatalf("source %d's last datagram: %v, got %d bytes % x", s, err, n, buf[:min(n, 48)])
		}
	}

	r.mu.Lock()
	gotSlow, gotFrom := r.slowPathed, r.slowFrom
	r.mu.Unlock()
	if len(gotSlow) != len(wantSlow) {
		t.Fatalf("SlowPath saw %d datagrams, want %d", len(gotSlow), len(wantSlow))
	}
	for i := range wantSlow {
		if !bytes.Equal(gotSlow[i], wantSlow[i]) || gotFrom[i].Addr().Unmap() != wantSlowFrom[i].Addr() || gotFrom[i].Port() != wantSlowFrom[i].Port() {
			t.Fatalf("SlowPath call %d: %d bytes from %v, want %d bytes from %v", i, len(gotSlow[i]), gotFrom[i], len(wantSlow[i]), wantSlowFrom[i])
		}
	}
	var fwdPkts, spoofPkts uint64
	r.fwd.PairCounters(func(id uint32, c switching.Counters) {
		fwdPkts += c.Packets[switching.ReasonToGPU] + c.Packets[switching.ReasonToHost]
		spoofPkts += c.Packets[switching.ReasonSpoofed]
	})
	total := 0
	for _, n := range relayed {
		total += n
	}
	if fwdPkts != uint64(total) || spoofPkts != uint64(spoofed) {
		t.Fatalf("pair counters: %d forwarded, %d spoofed; want %d and %d", fwdPkts, spoofPkts, total, spoofed)
	}
	var unknownPkts uint64
	r.fwd.PortCounters(func(port string, c switching.Counters) { unknownPkts += c.Packets[switching.ReasonUnknownPair] })
	if unknownPkts != uint64(unknown) {
		t.Fatalf("port counters: %d unknown_pair, want %d", unknownPkts, unknown)
	}
	if f := r.drv.RelayFailures(); f != 0 {
		t.Fatalf("%d relay failures", f)
	}
	r.stop(t)
	if b := switching.UDPLargestBatch(r.drv); !perDatagram && b < 2 {
		t.Fatalf("the largest receive took %d datagrams: nothing was batched", b)
	}
}

// TestUDPDriverCountsFailedRelays: datagrams to a destination the kernel
// refuses (a non-loopback one from a socket bound to 127.0.0.1: EINVAL,
// or ENETUNREACH without a route) are
// counted and logged at most a line per interval plus the count, and the
// datagrams around them, in the same batches, still go out in order.
func TestUDPDriverCountsFailedRelays(t *testing.T) {
	for _, perDatagram := range []bool{false, true} {
		t.Run(fmt.Sprintf("perdatagram=%v", perDatagram), func(t *testing.T) {
			var logBuf syncbuf.Buffer
			log := slog.New(slog.NewTextHandler(&logBuf, nil))
			bad := listenLoopback(t)
			ba := bad.LocalAddr().(*net.UDPAddr).AddrPort()
			// Pair 7: from bad, to 192.0.2.1:9 (TEST-NET-1).
			rule := switching.Rule{ID: 7}
			rule.Dir[0] = switching.Direction{InPort: switching.UDPIndex, OutPort: switching.UDPIndex,
				SrcIP: ba.Addr().As4(), SrcUDPPort: ba.Port(), NewDstIP: [4]byte{192, 0, 2, 1}, DstUDPPort: 9}
			r := newUDPRig(t, "127.0.0.1:0", perDatagram, 1, log, rule)
			const n = 100
			buf := make([]byte, 2048)
			for i := range n {
				if _, err := bad.WriteToUDP(testDatagram(encap.MsgTLP, 7, 9, i, 64), r.sw); err != nil {
					t.Fatal(err)
				}
				if _, err := r.hosts[0].WriteToUDP(testDatagram(encap.MsgTLP, pairID(0), 0, i, 64), r.sw); err != nil {
					t.Fatal(err)
				}
			}
			r.start()
			r.gpus[0].SetReadDeadline(time.Now().Add(5 * time.Second))
			for i := range n {
				k, _, err := r.gpus[0].ReadFromUDPAddrPort(buf)
				if err != nil {
					t.Fatalf("good datagram %d of %d: %v", i, n, err)
				}
				if !bytes.Equal(buf[:k], testDatagram(encap.MsgTLP, pairID(0), 0, i, 64)) {
					t.Fatalf("good datagram %d: got seq %d", i, binary.BigEndian.Uint32(buf[encap.HeaderLen+1:]))
				}
			}
			// The last good datagram went out after every bad one was tried.
			if f := r.drv.RelayFailures(); f != n {
				t.Fatalf("RelayFailures %d, want %d", f, n)
			}
			r.stop(t) // flushes the count
			if b := switching.UDPLargestBatch(r.drv); !perDatagram && b < 2 {
				t.Fatalf("the largest receive took %d datagrams: nothing was batched", b)
			}
			out := logBuf.String()
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) > 4 {
				t.Fatalf("%d log lines for %d failed relays, want a few:\n%s", len(lines), n, out)
			}
			if !strings.Contains(lines[0], "UDP relay failed") || !strings.Contains(lines[0], "to=192.0.2.1:9") || !strings.Contains(lines[0], "err=") {
				t.Fatalf("first line %q: want the failure, its destination and error", lines[0])
			}
			if accounted := failuresLogged(t, lines); accounted != n {
				t.Fatalf("the log accounts for %d failed relays, want %d:\n%s", accounted, n, out)
			}
		})
	}
}

// TestUDPDriverRelayDoesNotAllocate: relaying bursts costs no allocation
// in steady state (buffers, socket addresses and syscall closures are
// made once).
func TestUDPDriverRelayDoesNotAllocate(t *testing.T) {
	r := newUDPRig(t, "127.0.0.1:0", false, 1, nil)
	r.start()
	msg := testDatagram(encap.MsgTLP, pairID(0), 0, 1, 256)
	sw := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), r.drv.Addr().Port())
	buf := make([]byte, 2048)
	r.gpus[0].SetReadDeadline(time.Now().Add(time.Minute))
	burst := func() {
		for range 64 {
			if _, err := r.hosts[0].WriteToUDPAddrPort(msg, sw); err != nil {
				t.Fatal(err)
			}
		}
		for range 64 {
			if _, _, err := r.gpus[0].ReadFromUDPAddrPort(buf); err != nil {
				t.Fatal(err)
			}
		}
	}
	burst() // the first batch, the poller's registration
	if a := testing.AllocsPerRun(20, burst); a != 0 {
		t.Fatalf("%v allocations per burst of 64 datagrams, want 0", a)
	}
}

// TestUDPDriverRunEndsOnClose: Close ends a Run blocked in a receive,
// without an error.
func TestUDPDriverRunEndsOnClose(t *testing.T) {
	for _, perDatagram := range []bool{false, true} {
		r := newUDPRig(t, "127.0.0.1:0", perDatagram, 1, nil)
		r.start()
		r.drv.Close()
		r.cancel = nil // the context stays: Close alone must end Run
		select {
		case err := <-r.runErr:
			if err != nil {
				t.Fatalf("perdatagram=%v: Run after Close: %v", perDatagram, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("perdatagram=%v: Run did not return 10s after Close", perDatagram)
		}
	}
}

// failuresLogged counts the failures a rate-limited log accounts for: each
// line is a failure logged as it is, or (suppressed=N) the count of those
// held back since.
func failuresLogged(t *testing.T, lines []string) int {
	t.Helper()
	n := 0
	for _, l := range lines {
		k := 1
		if i := strings.Index(l, "suppressed="); i >= 0 {
			if _, err := fmt.Sscanf(l[i:], "suppressed=%d", &k); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
		}
		n += k
	}
	return n
}
