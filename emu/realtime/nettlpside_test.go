package realtime_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/bridge/nettlpside"
	"github.com/dxpu/dxpu/bridge/udp"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/host"
	"github.com/dxpu/dxpu/emu/realtime"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// hostID is the requester ID of the host's MMIO requests (its root
// complex).
var hostID = tlp.NewID(0, 0, 0)

// testNet is the /24 a test's addresses live in: .1 the bridge's NetTLP port,
// .2 the host's adapter (the client), .3 the host's memory, .10 and .11
// the two bridges' fabric sockets.
type testNet string

func (n testNet) addr(host int) netip.Addr {
	return netip.MustParseAddr(fmt.Sprintf("%s.%d", n, host))
}

// startPair runs a host-side bridge with a NetTLP adapter as its PCIe
// side and a GPU-side bridge whose PCIe side gpuSide builds, over UDP
// loopback, until the test ends; it returns once both are up.
func startPair(t testing.TB, n testNet, dma bool, gpuSide func(r *driver.Runner) (func(context.Context) error, error)) *nettlpside.Host {
	t.Helper()
	privtest.Loopback(t)
	hc, err := udp.Listen(netip.AddrPortFrom(n.addr(10), 0), netip.AddrPort{})
	if err != nil {
		t.Fatalf("cannot bind %v: %v", n.addr(10), err)
	}
	gc, err := udp.Listen(netip.AddrPortFrom(n.addr(11), 0), hc.LocalAddr())
	if err != nil {
		hc.Close()
		t.Fatalf("cannot bind %v: %v", n.addr(11), err)
	}
	hc.SetPeer(gc.LocalAddr())
	var runners [2]*driver.Runner
	for i, role := range []bridge.Role{bridge.RoleHost, bridge.RoleGPU} {
		// Timers for a shared, loaded test machine: a goroutine may stall
		// for tens of milliseconds.
		b, err := bridge.New(bridge.Config{Role: role, PairID: 7, Keepalive: 100 * time.Millisecond, DeadAfter: 5 * time.Second,
			CompletionTimeout: 5 * time.Second, MaxRTO: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		runners[i] = driver.New(b, []*udp.Conn{hc, gc}[i])
	}
	cfg := nettlp.AdapterConfig{Local: n.addr(1), Remote: n.addr(2)}
	if dma {
		cfg.DMARemote = n.addr(3)
	}
	a, err := nettlp.NewAdapter(cfg)
	if err != nil {
		t.Fatalf("cannot bind %v: %v", n.addr(1), err)
	}
	h, err := nettlpside.NewHost(runners[0], a, nil)
	if err != nil {
		t.Fatal(err)
	}
	run, err := gpuSide(runners[1])
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for _, fn := range []func(context.Context) error{runners[0].Run, runners[1].Run, h.Run, run} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil && !errors.Is(err, context.Canceled) {
				errs <- err
			}
		}()
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
	waitfor.Until(t, "bridge pair up", func() bool {
		return runners[0].State() == bridge.StateUp && runners[1].State() == bridge.StateUp
	})
	return h
}

func dial(t testing.TB, n testNet, tag uint8) *nettlp.Client {
	t.Helper()
	privtest.Loopback(t)
	c, err := nettlp.Dial(n.addr(2), n.addr(1), tag, hostID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.Timeout = 5 * time.Second // a loaded machine; libtlp waits 500 ms
	return c
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed ^ byte(i*31+i>>8)
	}
	return b
}

// concurrentTags has ten libtlp-like clients, one per tag and UDP port,
// write their own region at base and read it back, in whole and in
// pieces, all at once. open is a client the test already holds (its
// tag's port is taken).
func concurrentTags(t *testing.T, n testNet, base uint64, open *nettlp.Client, openTag uint8) {
	t.Helper()
	clients := make([]*nettlp.Client, 10)
	for i := range clients {
		if uint8(i) == openTag {
			clients[i] = open
			continue
		}
		clients[i] = dial(t, n, uint8(i))
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(clients))
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			addr := base + uint64(i)*0x1000
			want := pattern(512, byte(i+1))
			if _, err := c.WriteAligned(addr, want, 256); err != nil {
				errs <- fmt.Errorf("tag %d write: %w", i, err)
				return
			}
			for round := range 5 {
				got := make([]byte, len(want))
				if n, err := c.Read(addr, got); err != nil || n != len(got) {
					errs <- fmt.Errorf("tag %d round %d: read %d bytes: %v", i, round, n, err)
					return
				}
				if !bytes.Equal(got, want) {
					errs <- fmt.Errorf("tag %d round %d: read back other data", i, round)
					return
				}
				small := make([]byte, 6)
				if _, err := c.Read(addr+uint64(round*7+1), small); err != nil {
					errs <- fmt.Errorf("tag %d round %d: small read: %w", i, round, err)
					return
				}
				if o := round*7 + 1; !bytes.Equal(small, want[o:o+6]) {
					errs <- fmt.Errorf("tag %d round %d: unaligned read % x, want % x", i, round, small, want[o:o+6])
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// splitRead reads len(want) aligned bytes at addr in one request and
// returns how many TLPs the host-side bridge received from the fabric
// meanwhile: the completions of that read (the host's MMIO writes bring
// nothing back, and the bridge counts a TLP before handing it to the
// adapter, so every count of an earlier read is in before it returned).
func splitRead(t *testing.T, h *nettlpside.Host, c *nettlp.Client, addr uint64, want []byte) uint64 {
	t.Helper()
	before := h.Runner().Counters().TLPsReceived
	got := make([]byte, len(want))
	if n, err := c.Read(addr, got); err != nil || n != len(got) {
		t.Fatalf("read %d bytes at %#x: %d, %v", len(want), addr, n, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read at %#x returned other data", addr)
	}
	return h.Runner().Counters().TLPsReceived - before
}

// TestNetTLPHostToEmulatedGPU: a host's NetTLP adapter (a libtlp-like
// client for its MMIO, a NetTLP target for its memory) on the host-side
// bridge, an emulated GPU on the GPU-side bridge, UDP between them. The
// host reads the GPU's ID register, writes and reads a register and VRAM
// through BAR1 (reads split in several completions, ten tags at once),
// then launches work whose DMA reads and writes the host's memory through
// the pair and its NetTLP port.
func TestNetTLPHostToEmulatedGPU(t *testing.T) {
	t.Parallel()
	privtest.Loopback(t)
	n := testNet("127.0.41")
	hostMem, err := nettlp.NewSparseMemory(0, 1<<32, nil)
	if err != nil {
		t.Fatal(err)
	}
	target, err := nettlp.NewTarget(nettlp.TargetConfig{Addr: n.addr(3)}, hostMem)
	if err != nil {
		t.Fatalf("cannot bind %v: %v", n.addr(3), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- target.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	})

	var g *realtime.BridgedGPU
	h := startPair(t, n, true, func(r *driver.Runner) (func(context.Context) error, error) {
		var err error
		g, err = realtime.NewBridgedGPU(r, realtime.BridgedGPUConfig{})
		if err != nil {
			return nil, err
		}
		return g.Run, nil
	})
	cfg := g.Config()
	c := dial(t, n, 0)

	var w [4]byte
	if _, err := c.Read(cfg.BAR0+gpu.RegBoot0, w[:]); err != nil {
		t.Fatal(err)
	}
	if got := binary.LittleEndian.Uint32(w[:]); got != gpu.H100SXM.Boot0 {
		t.Fatalf("BOOT_0 %#x, want %#x", got, gpu.H100SXM.Boot0)
	}
	binary.LittleEndian.PutUint32(w[:], 0xc0ffee42)
	if _, err := c.Write(cfg.BAR0+gpu.RegScratch, w[:]); err != nil {
		t.Fatal(err)
	}
	var r [4]byte
	if _, err := c.Read(cfg.BAR0+gpu.RegScratch, r[:]); err != nil || r != w {
		t.Fatalf("SCRATCH read % x (%v), wrote % x", r, err, w)
	}

	// VRAM through BAR1: 4 KiB written in MPS pieces, read back 1 KiB at a
	// time, each read answered in MPS (256-byte) completions.
	vram := pattern(4096, 0x5a)
	if _, err := c.WriteAligned(cfg.BAR1+0x10000, vram, 256); err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(vram); off += 1024 {
		if k := splitRead(t, h, c, cfg.BAR1+0x10000+uint64(off), vram[off:off+1024]); k != 1024/256 {
			t.Fatalf("1 KiB read at +%#x came in %d completions, want 4", off, k)
		}
	}
	g.Do(func(g *gpu.GPU) {
		got := make([]byte, len(vram))
		g.VRAM.Read(0x10000, got)
		if !bytes.Equal(got, vram) {
			t.Error("the GPU's VRAM does not hold what the host wrote through BAR1")
		}
	})

	// libtlp's habits through the pair: dma_read of a whole 4 KiB (Length
	// 1024 spilling into the AT bits) and dma_read_aligned by MRRS 512.
	big := pattern(8192, 0x3c)
	if _, err := c.WriteAligned(cfg.BAR1+0x40000, big, 256); err != nil {
		t.Fatal(err)
	}
	page := make([]byte, 4096)
	if n, err := c.Read(cfg.BAR1+0x40000, page); err != nil || n != len(page) || !bytes.Equal(page, big[:4096]) {
		t.Fatalf("4 KiB dma_read: %d bytes, %v, equal %v", n, err, bytes.Equal(page, big[:4096]))
	}
	all := make([]byte, len(big))
	if n, err := c.ReadAligned(cfg.BAR1+0x40000, all, 512); err != nil || n != len(all) || !bytes.Equal(all, big) {
		t.Fatalf("dma_read_aligned: %d bytes, %v", n, err)
	}

	concurrentTags(t, n, cfg.BAR1+0x100000, c, 0)

	gpuWork(t, h, c, g, hostMem, target.Stats())
}

// gpuWork has the GPU's DMA read and write host memory: a GPFIFO entry
// and a pushbuffer written into hostMem copy 8 KiB in, copy it back out
// elsewhere, and release a semaphore; stats are the counters of the NetTLP
// port serving hostMem.
func gpuWork(t *testing.T, h *nettlpside.Host, c *nettlp.Client, g *realtime.BridgedGPU, hostMem nettlp.Memory, stats *nettlp.Stats) {
	t.Helper()
	cfg := g.Config()
	var w [4]byte
	const ring, pb, src, dst, sem, vramAt = 0x10000, 0x20000, 0x100000, 0x200000, 0x30000, 0x400000
	data := pattern(8192, 0xa7)
	var cmds []byte
	cmds = gpu.AppendCommand(cmds, gpu.Command{Op: gpu.OpCopy, Src: src, Dst: vramAt, Len: uint64(len(data)), Dir: gpu.DirH2D})
	cmds = gpu.AppendCommand(cmds, gpu.Command{Op: gpu.OpCopy, Src: vramAt, Dst: dst, Len: uint64(len(data)), Dir: gpu.DirD2H})
	cmds = gpu.AppendCommand(cmds, gpu.Command{Op: gpu.OpSemRelease, Addr: sem, Value: 0x77, Flags: gpu.SemHost})
	for _, m := range []struct {
		addr uint64
		b    []byte
	}{{src, data}, {pb, cmds}, {ring, gpu.AppendGPEntry(nil, pb, uint32(len(cmds)))}} {
		if err := hostMem.WriteAt(m.b, m.addr); err != nil {
			t.Fatal(err)
		}
	}
	for _, reg := range []struct {
		off uint64
		v   uint32
	}{{gpu.ChGPBaseLo, ring}, {gpu.ChGPBaseHi, 0}, {gpu.ChGPEntries, 4}, {gpu.ChGPPut, 1}} {
		binary.LittleEndian.PutUint32(w[:], reg.v)
		if _, err := c.Write(cfg.BAR0+gpu.ChannelReg(0, reg.off), w[:]); err != nil {
			t.Fatal(err)
		}
	}
	stuck := true
	defer func() {
		if stuck {
			g.Do(func(g *gpu.GPU) { t.Logf("GPU stats %+v", g.Stats) })
			t.Logf("host memory port %+v", stats.Snapshot())
		}
	}()
	// Progress: the GPU's DMA through the host's memory port.
	waitfor.Progress(t, "the GPU releasing the semaphore", func() (bool, uint64) {
		var s [8]byte
		if err := hostMem.ReadAt(s[:], sem); err != nil {
			t.Fatal(err)
		}
		st := stats.Snapshot()
		return binary.LittleEndian.Uint64(s[:]) == 0x77, st.Reads + st.Writes
	})
	stuck = false
	got := make([]byte, len(data))
	if err := hostMem.ReadAt(got, dst); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("the GPU's device-to-host copy left other data in host memory")
	}
	if k := splitRead(t, h, c, cfg.BAR1+vramAt, data[:1024]); k != 4 {
		t.Fatalf("VRAM read after the copy came in %d completions", k)
	}
	st := stats.Snapshot()
	// 8 KiB by MRRS 512 plus the ring and pushbuffer fetches; 8 KiB by
	// MPS 256 plus the semaphore.
	if st.Reads < 8192/512+2 || st.BytesWritten < 8192+8 {
		t.Fatalf("host memory port saw %+v", st)
	}
	g.Do(func(g *gpu.GPU) {
		if g.Stats.Errors != 0 || g.Stats.BadCompletion != 0 || g.Stats.URs != 0 {
			t.Errorf("GPU stats %+v", g.Stats)
		}
	})
	if h.Lost() != 0 || h.Refused() != 0 {
		t.Fatalf("host side lost %d, refused %d TLPs", h.Lost(), h.Refused())
	}
}

// TestNetTLPHostToMemoryDevice: the same pair with a memory-backed
// completer in the GPU's place: writes land, reads return them in several
// completions, ten tags at once, and an address outside the memory gets
// UR, which libtlp reports as a bad message.
func TestNetTLPHostToMemoryDevice(t *testing.T) {
	t.Parallel()
	n := testNet("127.0.44")
	const base = 0x20_0000_0000
	mem, err := nettlp.NewSparseMemory(base, 16<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	var dev *nettlpside.MemoryDevice
	h := startPair(t, n, false, func(r *driver.Runner) (func(context.Context) error, error) {
		var err error
		dev, err = nettlpside.NewMemoryDevice(r, mem, nettlp.CompleterConfig{MPS: 256, CompleterID: tlp.NewID(3, 0, 0)})
		if err != nil {
			return nil, err
		}
		return dev.Run, nil
	})
	c := dial(t, n, 3)
	want := pattern(2048, 0x11)
	if _, err := c.WriteAligned(base+0x1000, want, 512); err != nil {
		t.Fatal(err)
	}
	if k := splitRead(t, h, c, base+0x1000, want); k != 2048/256 {
		t.Fatalf("2 KiB read came in %d completions, want 8", k)
	}
	got := make([]byte, len(want))
	if err := mem.ReadAt(got, base+0x1000); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("device memory does not hold the writes (%v)", err)
	}
	concurrentTags(t, n, base+0x10000, c, 3)
	var w [4]byte
	if _, err := c.Read(base+16<<20, w[:]); !errors.Is(err, nettlp.ErrBadCompletion) {
		t.Fatalf("read outside the device: %v, want a UR", err)
	}
	// The device counts the UR after sending it: give it a moment.
	waitfor.Until(t, "the device counting its UR", func() bool { return dev.Stats().UR.Load() != 0 })
	if st := dev.Stats().Snapshot(); st.UR != 1 || st.Malformed != 0 {
		t.Fatalf("device stats %+v", st)
	}
}

// TestNetTLPGPUDMAIntoEmulatedHost closes the loop with the emulated
// host's own NetTLP port (emu/realtime.ServeNetTLP) standing for the
// host's memory: the remote GPU's DMA reads fetch the commands and data the
// emulated host put in its DRAM, and its DMA writes land there, all as
// NetTLP datagrams through the host-side bridge.
func TestNetTLPGPUDMAIntoEmulatedHost(t *testing.T) {
	t.Parallel()
	privtest.Loopback(t)
	n := testNet("127.0.51")
	s := sim.New(1)
	clk := realtime.New(s)
	eh := host.New(s, host.Config{})
	port, err := realtime.ServeNetTLP(context.Background(), nettlp.TargetConfig{Addr: n.addr(3)}, eh, clk)
	if err != nil {
		t.Fatalf("cannot bind %v: %v", n.addr(3), err)
	}
	t.Cleanup(func() {
		if err := port.Close(); err != nil {
			t.Error(err)
		}
	})
	dram, err := realtime.HostDRAM(eh, clk)
	if err != nil {
		t.Fatal(err)
	}
	var g *realtime.BridgedGPU
	h := startPair(t, n, true, func(r *driver.Runner) (func(context.Context) error, error) {
		var err error
		g, err = realtime.NewBridgedGPU(r, realtime.BridgedGPUConfig{})
		if err != nil {
			return nil, err
		}
		return g.Run, nil
	})
	gpuWork(t, h, dial(t, n, 0), g, dram, port.Target.Stats())
	// The emulated host's own view of its memory holds the semaphore.
	clk.World().Lock()
	v := eh.Mem.Uint64(0x30000)
	clk.World().Unlock()
	if v != 0x77 {
		t.Fatalf("emulated host reads %#x at the semaphore", v)
	}
}
