package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/bridge/nettlpside"
	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/bridge/udp"
	"github.com/dxpu/dxpu/internal/app/childproc"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/testbin"
	"github.com/dxpu/dxpu/tlp"
)

// The transfer both host sides make: a region of device memory at base.
const (
	pairBase = 0x1_0000_0000
	pairID   = 1
	// stallLimit: a run fails when nothing moves for this long.
	stallLimit = 30 * time.Second
	// cplTimeout is the host sides' completion timeout and deadAfter every
	// side's silence limit. Both must outlast the longest stall of a loaded
	// machine, or the test fails for the load: 256 reads of 4 KiB in flight
	// can outlast PCIe's 50 ms, and beside CPU hogs a side went unheard
	// for 795 ms. A session that ends loses the posted writes not yet
	// acknowledged (EventPostedLost, by design): with 500 ms, a link that
	// went down mid-write once made the reads return zeros where the lost
	// writes should have landed.
	cplTimeout = 5 * time.Second
	deadAfter  = 5 * time.Second
)

// patternByte is byte i of the region, as example/pair.c computes it.
func patternByte(i uint64) byte {
	x := (i >> 3) + 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	x ^= x >> 31
	return byte(x >> ((i & 7) * 8))
}

// figures are what a host side reports (pair.c's JSON line).
type figures struct {
	Side       string  `json:"side"`
	OK         bool    `json:"ok"`
	Error      string  `json:"error"`
	Bytes      uint64  `json:"bytes"`
	WriteS     float64 `json:"write_s"`
	WriteGbps  float64 `json:"write_gbps"`
	ReadS      float64 `json:"read_s"`
	ReadGbps   float64 `json:"read_gbps"`
	Mismatches uint64  `json:"mismatches"`
	// Keyed runs (--key-hex).
	Keyed        bool   `json:"keyed"`
	FramesSealed uint64 `json:"frames_sealed"`
	FramesOpened uint64 `json:"frames_opened"`
	TxKeyEvents  uint64 `json:"tx_key_events"`
	TxEpoch      uint32 `json:"tx_epoch"`
}

// pairKey is the keyed pair's key: both sides hold it.
var pairKey = bytes.Repeat([]byte{0x5c}, 32)

// TestCABI builds the library both ways with the system C compiler,
// proves the header matches the exports, runs the bad-input program
// against the shared library, and runs example/pair.c (static) as the host
// side of a pair against a Go GPU side over UDP on loopback, then the same
// transfer with a pure-Go host side, and logs both.
func TestCABI(t *testing.T) {
	goTool := privtest.Tool(t, "go")
	cc := privtest.Tool(t, "cc")
	dir := t.TempDir()
	env := append(os.Environ(), "CGO_ENABLED=1", "CC="+cc)
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %q: %v\n%s", name, args, err, out)
		}
	}
	run(goTool, "build", "-buildmode=c-archive", "-o", filepath.Join(dir, "libdxpubridge.a"), ".")
	run(goTool, "build", "-buildmode=c-shared", "-o", filepath.Join(dir, "libdxpubridge.so"), ".")
	cflags := []string{"-std=c11", "-Wall", "-Wextra", "-Werror", "-Iinclude"}
	run(cc, append(cflags, "-pedantic-errors", "-I"+dir, "-c", "testdata/abicheck.c", "-o", filepath.Join(dir, "abicheck.o"))...)
	run(cc, append(cflags, "-O2", "example/pair.c", filepath.Join(dir, "libdxpubridge.a"), "-lpthread", "-o", filepath.Join(dir, "pair"))...)
	run(cc, append(cflags, "-O1", "example/badinput.c", "-L"+dir, "-Wl,-rpath,"+dir, "-ldxpubridge", "-o", filepath.Join(dir, "badinput"))...)

	t.Run("badinput", func(t *testing.T) {
		out, err := exec.Command(filepath.Join(dir, "badinput")).CombinedOutput()
		if err != nil {
			t.Fatalf("badinput: %v\n%s", err, out)
		}
		if !bytes.Contains(out, []byte(" 0 failed")) {
			t.Fatalf("badinput did not report its checks:\n%s", out)
		}
		t.Logf("%s", bytes.TrimSpace(out))
	})

	region := uint64(64 << 20)
	if testing.Short() {
		region = 4 << 20
	}
	var c, g figures
	t.Run("pair", func(t *testing.T) {
		c = runCPair(t, filepath.Join(dir, "pair"), region, false)
		g = runGoPair(t, region)
		t.Logf("C host side:  %d MiB written in %.3f s (%.2f Gbit/s), read in %.3f s (%.2f Gbit/s)",
			c.Bytes>>20, c.WriteS, c.WriteGbps, c.ReadS, c.ReadGbps)
		t.Logf("Go host side: %d MiB written in %.3f s (%.2f Gbit/s), read in %.3f s (%.2f Gbit/s)",
			g.Bytes>>20, g.WriteS, g.WriteGbps, g.ReadS, g.ReadGbps)
		t.Logf("C/Go: writes %.2f, reads %.2f", c.WriteGbps/g.WriteGbps, c.ReadGbps/g.ReadGbps)
	})
	// ABI version 2: the same transfer keyed (GCM, generation 3), with a
	// move to a new key epoch between the writes and the reads.
	t.Run("pair keyed", func(t *testing.T) {
		k := runCPair(t, filepath.Join(dir, "pair"), min(region, 8<<20), true)
		if !k.Keyed || k.FramesSealed == 0 || k.FramesOpened == 0 || k.TxKeyEvents == 0 || k.TxEpoch == 0 {
			t.Fatalf("keyed pair: %+v: want sealed and opened frames and a move to a new epoch", k)
		}
		t.Logf("C host side keyed: %d MiB written in %.3f s (%.2f Gbit/s), read in %.3f s (%.2f Gbit/s); %d frames sealed, %d opened, epoch %d",
			k.Bytes>>20, k.WriteS, k.WriteGbps, k.ReadS, k.ReadGbps, k.FramesSealed, k.FramesOpened, k.TxEpoch)
	})
	// As the README pairs them: the example at its defaults against
	// `dxpu bridge` at its own. The example took the library's 10 ms
	// dead-after while the daemon keeps alive every 50 ms, and its link
	// went down mid-transfer.
	t.Run("pair against dxpu bridge", func(t *testing.T) {
		runCPairAgainstDaemon(t, filepath.Join(dir, "pair"), testbin.Dxpu(t))
	})
}

// runCPairAgainstDaemon runs pair.c with no flags but the addresses and a
// 4 MiB region against `dxpu bridge --pcie memory` as README shows it.
func runCPairAgainstDaemon(t *testing.T, pairBin, dxpu string) {
	ln, err := udp.Listen(netip.MustParseAddrPort("127.0.0.1:0"), netip.AddrPort{})
	if err != nil {
		t.Fatal(err)
	}
	daemonAddr := ln.LocalAddr()
	ln.Close()
	cmd := exec.Command(pairBin, "--peer", daemonAddr.String(), "--local", "127.0.0.1:0", "--bytes", strconv.Itoa(4<<20))
	lines, listening, stderr := startPair(t, cmd)
	defer func() { _ = cmd.Process.Kill() }()
	d := exec.Command(dxpu, "bridge", "--role", "gpu", "--listen", daemonAddr.String(), "--peer", listening.String(),
		"--pcie", "memory", "--mem-base", "0x100000000", "--insecure-no-keys")
	var dlog bytes.Buffer
	d.Stderr = &dlog
	if err := childproc.Start(d, nil); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Process.Kill(); _ = d.Wait() }()
	var last []byte
	for lines.Scan() {
		last = append(last[:0], lines.Bytes()...)
	}
	werr := cmd.Wait()
	var f figures
	if err := json.Unmarshal(last, &f); err != nil || werr != nil || !f.OK || f.Mismatches != 0 || f.Bytes != 4<<20 {
		t.Fatalf("pair: exit %v, last line %s (%v)\npair's stderr:\n%s\ndxpu bridge's:\n%s", werr, last, err, stderr.String(), dlog.String())
	}
}

// gpuSide is the Go GPU side: a bridge runner over UDP with memory behind.
type gpuSide struct {
	conn *udp.Conn
	r    *driver.Runner
	mem  *nettlp.SparseMemory
	dev  *nettlpside.MemoryDevice
}

func newGPUSide(t *testing.T, region uint64, keyed bool) *gpuSide {
	t.Helper()
	conn, err := udp.Listen(netip.MustParseAddrPort("127.0.0.1:0"), netip.MustParseAddrPort("127.0.0.1:9"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := bridge.Config{Role: bridge.RoleGPU, PairID: pairID, Seed: uint64(time.Now().UnixNano()), DeadAfter: deadAfter}
	if keyed {
		cfg.Key, cfg.KeyGeneration, cfg.SealMode = pairKey, 3, seal.ModeGCM
	}
	b, err := bridge.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := nettlp.NewSparseMemory(pairBase, region, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := &gpuSide{conn: conn, r: driver.New(b, conn), mem: mem}
	g.r.Progress = make(chan struct{}, 1)
	g.dev, err = nettlpside.NewMemoryDevice(g.r, mem, nettlp.CompleterConfig{MPS: 512, CompleterID: tlp.NewID(3, 0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// start runs the GPU side until ctx ends; wait returns once it stopped.
func (g *gpuSide) start(t *testing.T, ctx context.Context, peer netip.AddrPort) (wait func()) {
	g.conn.SetPeer(peer)
	done := make(chan error, 2)
	go func() { done <- g.r.Run(ctx) }()
	go func() { done <- g.dev.Run(ctx) }()
	return func() {
		for range 2 {
			if err := <-done; err != nil && ctx.Err() == nil {
				t.Errorf("GPU side: %v", err)
			}
		}
	}
}

// checkMemory compares the device memory with the pattern, and checks the
// device got every request exactly once: the writes, the flushing read and
// the 4 KiB reads.
func (g *gpuSide) checkMemory(t *testing.T, region uint64) {
	t.Helper()
	if got, want := g.r.Counters().TLPsDelivered, region/512+1+region/4096; got != want {
		t.Errorf("the device got %d TLPs, want %d", got, want)
	}
	buf := make([]byte, 1<<20)
	for off := uint64(0); off < region; off += uint64(len(buf)) {
		if err := g.mem.ReadAt(buf, pairBase+off); err != nil {
			t.Fatal(err)
		}
		for i, b := range buf {
			if want := patternByte(off + uint64(i)); b != want {
				t.Fatalf("device memory at offset %#x: %#02x, want %#02x", off+uint64(i), b, want)
			}
		}
	}
}

// watch fails the test when the GPU side sees no frame for stallLimit
// before done closes.
func watch(t *testing.T, r *driver.Runner, done <-chan struct{}, stop func()) {
	t.Helper()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last, since := r.Counters().FramesReceived, time.Now()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			if n := r.Counters().FramesReceived; n != last {
				last, since = n, time.Now()
			} else if time.Since(since) > stallLimit {
				stop()
				t.Fatalf("no frame reached the GPU side for %v (counters %+v)", stallLimit, r.Counters())
			}
		}
	}
}

func runCPair(t *testing.T, bin string, region uint64, keyed bool) figures {
	t.Helper()
	g := newGPUSide(t, region, keyed)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.Command(bin, "--peer", g.conn.LocalAddr().String(), "--bytes", strconv.FormatUint(region, 10),
		"--base", strconv.FormatUint(pairBase, 10), "--pair", strconv.Itoa(pairID),
		"--completion-timeout-ms", strconv.FormatInt(cplTimeout.Milliseconds(), 10),
		"--dead-after-ms", strconv.FormatInt(deadAfter.Milliseconds(), 10))
	if keyed {
		cmd.Args = append(cmd.Args, "--key-hex", hex.EncodeToString(pairKey), "--key-generation", "3", "--seal-mode", "gcm")
	}
	lines, peer, stderr := startPair(t, cmd)
	defer func() { _ = cmd.Process.Kill() }()
	wait := g.start(t, ctx, peer)
	var last []byte
	done := make(chan struct{})
	go func() {
		defer close(done)
		for lines.Scan() {
			last = append(last[:0], lines.Bytes()...)
		}
	}()
	watch(t, g.r, done, func() { _ = cmd.Process.Kill() })
	werr := cmd.Wait()
	cancel()
	wait()
	var f figures
	if err := json.Unmarshal(last, &f); err != nil {
		t.Fatalf("pair's last line %q: %v (exit %v, stderr %s)", last, err, werr, stderr.String())
	}
	if werr != nil || !f.OK || f.Mismatches != 0 || f.Bytes != region {
		t.Fatalf("pair: exit %v, %+v, stderr %s", werr, f, stderr.String())
	}
	g.checkMemory(t, region)
	return f
}

// goHost is the pure-Go host side of the same transfer: a runner over UDP,
// writes through SendMany, reads with up to 256 tags outstanding. Like
// pair.c it gives up on any event but link-up (a link that went down lost
// writes, and says so) and on any completion but a successful one.
type goHost struct {
	r     *driver.Runner
	stop  context.CancelFunc // ends the transfer on a failure
	tags  chan uint16
	reads [256]struct {
		off, len, got uint64
		flush         bool
	}
	got       []byte
	bad       error
	flushDone chan struct{}
	readsDone chan struct{}
	left      int
}

// fail records the first failure and ends the transfer (under the
// runner's lock).
func (h *goHost) fail(err error) {
	if h.bad == nil {
		h.bad = err
	}
	h.stop()
}

// onEvent takes the bridge's events (under the runner's lock).
func (h *goHost) onEvent(e bridge.Event) {
	if e.Kind != bridge.EventLinkUp {
		h.fail(fmt.Errorf("host side event %v", e))
	}
}

// onTLP takes completions (under the runner's lock: no calls back).
func (h *goHost) onTLP(v tlp.View) {
	tag := v.Tag()
	if v.Kind() != tlp.CplD || v.Status() != tlp.StatusSC || tag >= 256 {
		h.fail(fmt.Errorf("unexpected TLP %v status %v tag %d", v.Kind(), v.Status(), tag))
		return
	}
	rd := &h.reads[tag]
	bc := uint64(v.ByteCount())
	p := v.Payload()[v.LowerAddress()&3:]
	k := min(uint64(len(p)), bc)
	if !rd.flush {
		copy(h.got[rd.off+rd.len-bc:], p[:k])
	}
	if rd.got += k; rd.got < rd.len {
		return
	}
	if rd.flush {
		close(h.flushDone)
	} else if h.left--; h.left == 0 {
		close(h.readsDone)
	}
	h.tags <- tag
}

// sendAll hands tlps over, waiting while the bridge pushes back.
func sendAll(ctx context.Context, r *driver.Runner, tlps [][]byte) error {
	for len(tlps) > 0 {
		n, err := r.SendMany(tlps)
		tlps = tlps[n:]
		if err != nil && !errors.Is(err, bridge.ErrBusy) {
			return err
		}
		if len(tlps) == 0 {
			return nil
		}
		if err := driver.SendWait(ctx, r, tlps[0]); err != nil {
			return err
		}
		tlps = tlps[1:]
	}
	return nil
}

func runGoPair(t *testing.T, region uint64) figures {
	t.Helper()
	g := newGPUSide(t, region, false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conn, err := udp.Listen(netip.MustParseAddrPort("127.0.0.1:0"), g.conn.LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	b, err := bridge.New(bridge.Config{Role: bridge.RoleHost, PairID: pairID, Seed: uint64(time.Now().UnixNano()),
		CompletionTimeout: cplTimeout, DeadAfter: deadAfter})
	if err != nil {
		t.Fatal(err)
	}
	h := &goHost{r: driver.New(b, conn), tags: make(chan uint16, 256), got: make([]byte, region),
		flushDone: make(chan struct{}), readsDone: make(chan struct{}), left: int(region / 4096)}
	h.r.Progress = make(chan struct{}, 1)
	h.r.OnTLP = h.onTLP
	h.r.OnEvent = h.onEvent
	tctx, stop := context.WithCancel(ctx)
	h.stop = stop
	for i := range 256 {
		h.tags <- uint16(i)
	}
	wait := g.start(t, ctx, conn.LocalAddr())
	hostDone := make(chan error, 1)
	go func() { hostDone <- h.r.Run(ctx) }()

	var res figures
	done := make(chan struct{})
	var werr error
	go func() {
		defer close(done)
		res, werr = h.transfer(tctx, region)
	}()
	watch(t, g.r, done, cancel)
	cancel()
	wait()
	<-hostDone
	// A failure the bridge reported comes first: the data of writes it
	// reported lost is expected to be missing.
	if h.bad != nil || werr != nil {
		t.Fatalf("Go host side: %v (transfer: %v)", h.bad, werr)
	}
	for i, b := range h.got {
		if want := patternByte(uint64(i)); b != want {
			t.Fatalf("read back at offset %#x: %#02x, want %#02x", i, b, want)
		}
	}
	g.checkMemory(t, region)
	return res
}

// transfer writes the pattern, flushes, reads it all back.
func (h *goHost) transfer(ctx context.Context, region uint64) (figures, error) {
	const batch = 32
	bufs, data := make([][]byte, batch), make([]byte, 512)
	for i := range bufs {
		bufs[i] = make([]byte, 16+512)
	}
	for h.r.State() != bridge.StateUp {
		select {
		case <-ctx.Done():
			return figures{}, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	t0 := time.Now()
	for off := uint64(0); off < region; {
		n := 0
		for ; n < batch && off < region; n, off = n+1, off+512 {
			p := tlp.Packet{Kind: tlp.MWr, RequesterID: tlp.NewID(1, 0, 0), Address: pairBase + off,
				FirstBE: 0xf, LastBE: 0xf, Data: data}
			for i := range data {
				data[i] = patternByte(off + uint64(i))
			}
			w, err := p.AppendTo(bufs[n][:0])
			if err != nil {
				return figures{}, err
			}
			bufs[n] = w
		}
		if err := sendAll(ctx, h.r, bufs[:n]); err != nil {
			return figures{}, err
		}
	}
	if err := h.read(ctx, <-h.tags, 0, 4, true); err != nil {
		return figures{}, err
	}
	select {
	case <-h.flushDone:
	case <-ctx.Done():
		return figures{}, ctx.Err()
	}
	t1 := time.Now()
	for off := uint64(0); off < region; off += 4096 {
		var tag uint16
		select {
		case tag = <-h.tags:
		case <-ctx.Done():
			return figures{}, ctx.Err()
		}
		if err := h.read(ctx, tag, off, 4096, false); err != nil {
			return figures{}, err
		}
	}
	select {
	case <-h.readsDone:
	case <-ctx.Done():
		return figures{}, ctx.Err()
	}
	t2 := time.Now()
	ws, rs := t1.Sub(t0).Seconds(), t2.Sub(t1).Seconds()
	bits := float64(region) * 8
	return figures{Side: "go", OK: true, Bytes: region, WriteS: ws, WriteGbps: bits / ws / 1e9, ReadS: rs, ReadGbps: bits / rs / 1e9}, nil
}

// read issues one MRd with tag.
func (h *goHost) read(ctx context.Context, tag uint16, off, n uint64, flush bool) error {
	h.reads[tag].off, h.reads[tag].len, h.reads[tag].got, h.reads[tag].flush = off, n, 0, flush
	last := uint8(0xf)
	if n == 4 {
		last = 0
	}
	p := tlp.Packet{Kind: tlp.MRd, RequesterID: tlp.NewID(1, 0, 0), Tag: tag, Address: pairBase + off,
		Length: uint16(n / 4), FirstBE: 0xf, LastBE: last}
	b, err := p.Encode()
	if err != nil {
		return err
	}
	return driver.SendWait(ctx, h.r, b)
}

// startPair starts pair.c's program cmd and reads the address it says it
// bound; the rest of its stdout is left in lines.
func startPair(t *testing.T, cmd *exec.Cmd) (lines *bufio.Scanner, listening netip.AddrPort, stderr *bytes.Buffer) {
	t.Helper()
	stderr = new(bytes.Buffer)
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := childproc.Start(cmd, nil); err != nil {
		t.Fatal(err)
	}
	lines = bufio.NewScanner(stdout)
	var hello struct{ Listening string }
	if !lines.Scan() || json.Unmarshal(lines.Bytes(), &hello) != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("pair did not say where it listens: %q, stderr %s", lines.Text(), stderr.String())
	}
	if listening, err = netip.ParseAddrPort(hello.Listening); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("pair listens at %q: %v", hello.Listening, err)
	}
	return lines, listening, stderr
}

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Remove()
	os.Exit(code)
}
