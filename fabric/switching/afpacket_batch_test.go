package switching_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/switchtest"
	"github.com/dxpu/dxpu/internal/syncbuf"
	"github.com/dxpu/dxpu/internal/xdptest"
	"github.com/dxpu/dxpu/tlp/encap"
)

// isDXPUEth: a raw-Ethernet dxpu frame, tagged or not (not the IPv6
// chatter of fresh interfaces).
func isDXPUEth(b []byte) bool {
	if len(b) < 18 {
		return false
	}
	t := binary.BigEndian.Uint16(b[12:])
	if t == encap.EtherTypeVLAN {
		t = binary.BigEndian.Uint16(b[16:])
	}
	return t == encap.EtherType
}

// TestPacketDriverRelaysBursts queues bursts of frames, several batches'
// worth, on both switch ports before the driver runs, so that its
// receives take full batches: untagged frames and tagged ones (whose tag
// veth strips and the driver puts back from PACKET_AUXDATA, each frame
// from its own control buffer), of many sizes, with CONTROL frames (slow
// path, forwarded) and frames of an unknown pair (slow path, dropped)
// mixed in. Each end gets every forwarded frame, rewritten as a reference
// forwarder says, in order; SlowPath sees the slow-path frames as they
// came in; the pair counters match the reference's.
func TestPacketDriverRelaysBursts(t *testing.T) {
	r := newPacketRig(t, nil)
	topo, fwd, ref, drv, hostConn, gpuConn := r.topo, r.fwd, r.ref, r.drv, r.host, r.gpu
	type slowFrame struct {
		port  string
		frame []byte
	}
	var mu sync.Mutex
	var gotSlow []slowFrame
	drv.SlowPath = func(port string, frame []byte) {
		mu.Lock()
		gotSlow = append(gotSlow, slowFrame{port, append([]byte(nil), frame...)})
		mu.Unlock()
	}

	const frames = 100 // each way
	want := map[*xdptest.Conn][][]byte{}
	wantSlow := map[string][][]byte{}
	for i := range frames {
		for dir := range 2 {
			from, to, src, in := hostConn, gpuConn, topo.HostIf.MAC, topo.SwitchHost
			if dir == 1 {
				from, to, src, in = gpuConn, hostConn, topo.GPUIf.MAC, topo.SwitchGPU
			}
			vlan, typ, id := -1, encap.MsgTLP, uint32(0x000c01)
			if i%3 == 1 {
				vlan = 7
			}
			switch {
			case i%10 == 5:
				typ = encap.MsgControl
			case i%13 == 6:
				id = 0x0dead // unknown pair
			}
			frame := switchtest.Frame(src, in.MAC, vlan, nil, typ, id, false)
			for k := range (i * 131) % 1300 { // trailing bytes: sizes differ, contents tell frames apart
				frame = append(frame, byte(i*7+dir+k))
			}
			frame = binary.BigEndian.AppendUint32(frame, uint32(dir<<16|i))
			if err := from.Send(frame); err != nil {
				t.Fatalf("sending frame %d: %v", i, err)
			}
			buf := append(make([]byte, switching.Headroom), frame...)
			res := ref.Forward(buf, switching.Headroom, uint32(in.Index))
			if res.Verdict == switching.VerdictSlowPath {
				wantSlow[in.Name] = append(wantSlow[in.Name], frame)
				res = ref.ForwardControl(buf, switching.Headroom, uint32(in.Index))
			}
			if res.Verdict == switching.VerdictForward {
				want[to] = append(want[to], buf[res.Off:])
			}
		}
	}

	r.start()
	for _, c := range []*xdptest.Conn{gpuConn, hostConn} {
		expectFrames(t, c, want[c])
	}
	r.stop()
	mu.Lock()
	defer mu.Unlock()
	seen := map[string][][]byte{}
	for _, s := range gotSlow {
		seen[s.port] = append(seen[s.port], s.frame)
	}
	for port, w := range wantSlow {
		if len(seen[port]) != len(w) {
			t.Fatalf("SlowPath saw %d frames on %s, want %d", len(seen[port]), port, len(w))
		}
		for i := range w {
			if !bytes.Equal(seen[port][i], w[i]) {
				t.Fatalf("SlowPath frame %d on %s: got\n% x\nwant\n% x", i, port, seen[port][i], w[i])
			}
		}
	}
	wantCtr, gotCtr := map[uint32]switching.Counters{}, map[uint32]switching.Counters{}
	ref.PairCounters(func(id uint32, c switching.Counters) { wantCtr[id] = c })
	fwd.PairCounters(func(id uint32, c switching.Counters) { gotCtr[id] = c })
	for id, w := range wantCtr {
		if gotCtr[id] != w {
			t.Fatalf("pair %d counters %+v, want %+v", id, gotCtr[id], w)
		}
	}
	if b := switching.PacketLargestBatch(drv); b < 2 {
		t.Fatalf("the largest receive took %d frames: nothing was batched", b)
	}
	if f := drv.TransmitFailures(); f != 0 {
		t.Fatalf("%d transmit failures", f)
	}
}

type packetRig struct {
	topo      *xdptest.Topology
	fwd, ref  *switching.Forwarder // ref: the expected decisions
	drv       *switching.PacketDriver
	host, gpu *xdptest.Conn
	cancel    context.CancelFunc
	done      chan error
	t         *testing.T
}

// newPacketRig makes a PacketDriver on the switch ports of the
// three-namespace topology for pair 0x000c01 with VLAN 42, and sockets on
// the bridge ends; start runs it. log nil: slog.Default().
func newPacketRig(t *testing.T, log *slog.Logger) *packetRig {
	privtest.NetNS(t)
	r := &packetRig{t: t, topo: xdptest.NewTopology(t)}
	tbl := r.topo.Table(0x000c01)
	tbl.Pairs[0].VLAN = 42
	var err error
	if r.fwd, err = r.topo.Forwarder(tbl); err != nil {
		t.Fatal(err)
	}
	if r.ref, err = r.topo.Forwarder(tbl); err != nil {
		t.Fatal(err)
	}
	if err := r.topo.Switch.Do(func() error {
		var err error
		r.drv, err = switching.NewPacketDriver(r.fwd, r.topo.Ports())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	r.drv.Log = log
	t.Cleanup(func() { r.stop(); r.drv.Close() })
	r.host = xdptest.OpenPacket(t, r.topo.Host, r.topo.HostIf)
	r.gpu = xdptest.OpenPacket(t, r.topo.GPU, r.topo.GPUIf)
	return r
}

func (r *packetRig) start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan error, 1)
	go func() { r.done <- r.drv.Run(ctx) }()
}

// stop ends Run (once) and checks it ended cleanly.
func (r *packetRig) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			r.t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		r.t.Errorf("Run did not return 10s after its context ended")
	}
}

// expectFrames reads the dxpu frames arriving on c and wants exactly want,
// in order.
func expectFrames(t *testing.T, c *xdptest.Conn, want [][]byte) {
	t.Helper()
	for i, w := range want {
		got, err := c.RecvMatching(5*time.Second, isDXPUEth)
		if err != nil {
			t.Fatalf("%s: forwarded frame %d of %d: %v", c.Iface.Name, i, len(want), err)
		}
		if !bytes.Equal(got, w) {
			t.Fatalf("%s: frame %d: got %d bytes, starting\n% x\nand ending % x; want %d bytes, starting\n% x\nand ending % x",
				c.Iface.Name, i, len(got), got[:min(len(got), 24)], got[max(0, len(got)-4):], len(w), w[:min(len(w), 24)], w[max(0, len(w)-4):])
		}
	}
}

// TestPacketDriverCountsTransmitFailures: frames too big for the egress
// port's MTU (EMSGSIZE) are counted and logged at most a line per interval
// plus the count, and the frames around them, in the same sendmmsg, still
// go out in order.
func TestPacketDriverCountsTransmitFailures(t *testing.T) {
	var logBuf syncbuf.Buffer
	r := newPacketRig(t, slog.New(slog.NewTextHandler(&logBuf, nil)))
	if err := r.topo.Switch.Do(func() error {
		l, err := netlink.LinkByName(r.topo.SwitchGPU.Name)
		if err != nil {
			return err
		}
		return netlink.LinkSetMTU(l, 600)
	}); err != nil {
		t.Fatal(err)
	}
	const frames = 100
	var want [][]byte
	big := 0
	for i := range frames {
		frame := switchtest.Frame(r.topo.HostIf.MAC, r.topo.SwitchHost.MAC, -1, nil, encap.MsgTLP, 0x000c01, false)
		pad := 100
		if i%3 == 1 {
			pad, big = 900, big+1 // above 600 bytes of MTU, tag or not
		}
		frame = append(frame, make([]byte, pad)...)
		frame = binary.BigEndian.AppendUint32(frame, uint32(i))
		if err := r.host.Send(frame); err != nil {
			t.Fatalf("sending frame %d: %v", i, err)
		}
		buf := append(make([]byte, switching.Headroom), frame...)
		if res := r.ref.Forward(buf, switching.Headroom, uint32(r.topo.SwitchHost.Index)); res.Verdict != switching.VerdictForward {
			t.Fatalf("frame %d: reference verdict %v", i, res.Verdict)
		} else if pad < 900 {
			want = append(want, buf[res.Off:])
		}
	}
	r.start()
	expectFrames(t, r.gpu, want)
	// The last frame is a small one: every big one was tried before it.
	if f := r.drv.TransmitFailures(); f != uint64(big) {
		t.Fatalf("TransmitFailures %d, want %d", f, big)
	}
	r.stop() // flushes the count
	if b := switching.PacketLargestBatch(r.drv); b < 2 {
		t.Fatalf("the largest receive took %d frames: nothing was batched", b)
	}
	out := logBuf.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) > 4 {
		t.Fatalf("%d log lines for %d failed transmissions, want a few:\n%s", len(lines), big, out)
	}
	if !strings.Contains(lines[0], "transmit failed") || !strings.Contains(lines[0], "port="+r.topo.SwitchGPU.Name) || !strings.Contains(lines[0], "message too long") {
		t.Fatalf("first line %q: want the failure, its port and error", lines[0])
	}
	if accounted := failuresLogged(t, lines); accounted != big {
		t.Fatalf("the log accounts for %d failed transmissions, want %d:\n%s", accounted, big, out)
	}
}
