package nettlpside

import (
	"context"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/tlp"
)

// pipe is an in-memory transport that counts the frames sent into it.
type pipe struct {
	out, in chan []byte
	done    chan struct{}
	once    sync.Once
	sent    atomic.Uint64
}

func newPipes() (*pipe, *pipe) {
	a, b := make(chan []byte, 1024), make(chan []byte, 1024)
	return &pipe{out: a, in: b, done: make(chan struct{})}, &pipe{out: b, in: a, done: make(chan struct{})}
}

func (p *pipe) Send(f []byte) error {
	select {
	case p.out <- append([]byte(nil), f...):
		p.sent.Add(1)
		return nil
	case <-p.done:
		return net.ErrClosed
	}
}

func (p *pipe) Recv(buf []byte) (int, error) {
	select {
	case f := <-p.in:
		return copy(buf, f), nil
	case <-p.done:
		return 0, net.ErrClosed
	}
}

func (p *pipe) Close() error { p.once.Do(func() { close(p.done) }); return nil }

// A 4 KiB read from the memory device comes back whole and in order in
// 16 CplDs (MPS 256) packed into as few frames as the MTU allows: handed
// to the bridge one at a time they left in 16 frames, each sealed and
// sent on its own (the daemon pair's DMA reads ran at a tenth of the
// wire's speed).
func TestMemoryDeviceReadFrames(t *testing.T) {
	const base, size = 0x20_0000_0000, 4096
	rs, _, _ := framingPair(t)
	mem, err := nettlp.NewSparseMemory(base, 1<<20, func(a uint64) byte { return byte(a * 7) })
	if err != nil {
		t.Fatal(err)
	}
	dev, err := NewMemoryDevice(rs[1], mem, nettlp.CompleterConfig{CompleterID: tlp.NewID(3, 0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []byte
	var cpls int
	rs[0].OnTLP = func(v tlp.View) {
		mu.Lock()
		defer mu.Unlock()
		if v.Kind() != tlp.CplD || v.Tag() != 5 {
			t.Errorf("got %v tag %d, want CplDs of tag 5", v.Kind(), v.Tag())
			return
		}
		got = append(got, v.Payload()...)
		cpls++
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, f := range []func(context.Context) error{rs[0].Run, rs[1].Run, dev.Run} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = f(ctx) }()
	}
	defer func() { cancel(); wg.Wait() }()
	waitfor.Until(t, "link up", func() bool { return rs[0].State() == bridge.StateUp && rs[1].State() == bridge.StateUp })

	// Frames that are neither a bare ACK/NAK nor a keepalive: those carry
	// the completions (a slow run, -race, sends more of the others).
	tlpFrames := func() uint64 {
		c := rs[1].Counters()
		return c.FramesSent - c.AcksSent - c.NaksSent - c.KeepalivesSent
	}
	before := tlpFrames()
	readThrough(t, ctx, rs[0], 5, base, size, func() int { mu.Lock(); defer mu.Unlock(); return len(got) })
	frames := tlpFrames() - before
	mu.Lock()
	defer mu.Unlock()
	for i := range size {
		if got[i] != byte((base+uint64(i))*7) {
			t.Fatalf("byte %d of the read is %#x, want %#x", i, got[i], byte((base+uint64(i))*7))
		}
	}
	// 16 CplDs of 268 bytes fit in 4 frames of 1472; one at a time they
	// take 16. A slow run (-race) may frame a request's completions in two
	// goes and send a credit update or keepalive answer besides: 10 leaves
	// room for that and still fails a CplD per frame.
	if cpls != 16 || frames > 10 {
		t.Errorf("%d completions in %d frames (no bare ACK/NAK or keepalive) from the GPU side, want 16 in at most 10", cpls, frames)
	}
}

// readThrough sends a size-byte memory read of tag at addr through the
// host side's runner r and waits until have, the bytes its completions
// brought, reaches size.
func readThrough(t *testing.T, ctx context.Context, r *driver.Runner, tag uint16, addr uint64, size int, have func() int) {
	t.Helper()
	req, err := (&tlp.Packet{Kind: tlp.MRd, Addr64: true, Length: uint16(size / 4), Tag: tag, FirstBE: 0xf, LastBE: 0xf, Address: addr}).AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := driver.SendWait(ctx, r, req); err != nil {
		t.Fatal(err)
	}
	waitfor.Progress(t, "the read's completions", func() (bool, uint64) {
		n := have()
		return n >= size, uint64(n)
	})
}

// framingPair is a host and a GPU runner joined by pipes, for the tests of
// how completions are framed. Their bridges keep completions, and a silent
// peer, an hour: at the defaults (50 ms, 10 ms) a loaded machine under
// -race turned the rest of a read into a CA (CI's race pass), or declared
// the link dead and the rest of the read, or all of it, into a UR (a whole
// stress's race pass); neither timer is what is checked.
func framingPair(t *testing.T) (rs [2]*driver.Runner, hp, gp *pipe) {
	t.Helper()
	return framingPairWith(t, nil)
}

// framingPairWith is framingPair with each side's configuration changed
// by change, when not nil.
func framingPairWith(t *testing.T, change func(*bridge.Config)) (rs [2]*driver.Runner, hp, gp *pipe) {
	t.Helper()
	hp, gp = newPipes()
	for i, role := range []bridge.Role{bridge.RoleHost, bridge.RoleGPU} {
		cfg := bridge.Config{Role: role, PairID: 1, MTU: 1472, CompletionTimeout: time.Hour, DeadAfter: time.Hour}
		if change != nil {
			change(&cfg)
		}
		b, err := bridge.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rs[i] = driver.New(b, []driver.Transport{hp, gp}[i])
	}
	return rs, hp, gp
}

// A memory device with MPS 2048 behind a GPU side taking 2 KiB payloads,
// facing a host side that takes 512 (its HELLO says so): the completions
// follow the peer, 512 bytes each, as PCIe enumeration sets a device's MPS
// to what its path takes, and OnMPS hears it once. Sent at 2048 the bridge
// refused them (ErrPeerTLPSize) and the device stopped.
func TestMemoryDeviceFollowsPeerPayload(t *testing.T) {
	const base, size = 0x20_0000_0000, 4096
	rs, _, _ := framingPairWith(t, func(c *bridge.Config) {
		c.MTU = 8972
		if c.Role == bridge.RoleGPU {
			c.MaxPayload = 2048
		}
	})
	mem, err := nettlp.NewSparseMemory(base, 1<<20, func(a uint64) byte { return byte(a * 3) })
	if err != nil {
		t.Fatal(err)
	}
	dev, err := NewMemoryDevice(rs[1], mem, nettlp.CompleterConfig{MPS: 2048, CompleterID: tlp.NewID(3, 0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var heard [][2]int
	dev.OnMPS = func(mps, peer int) {
		mu.Lock()
		defer mu.Unlock()
		heard = append(heard, [2]int{mps, peer})
	}
	var got []byte
	var sizes []int
	rs[0].OnTLP = func(v tlp.View) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, v.Payload()...)
		sizes = append(sizes, len(v.Payload()))
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var devErr error
	for i, f := range []func(context.Context) error{rs[0].Run, rs[1].Run, dev.Run} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); i == 2 {
				devErr = err
			}
		}()
	}
	defer func() { cancel(); wg.Wait() }()
	waitfor.Until(t, "link up", func() bool { return rs[0].State() == bridge.StateUp && rs[1].State() == bridge.StateUp })
	readThrough(t, ctx, rs[0], 6, base, size, func() int { mu.Lock(); defer mu.Unlock(); return len(got) })
	cancel()
	wg.Wait()
	if devErr != nil {
		t.Fatalf("the memory device stopped: %v", devErr)
	}
	for i := range size {
		if got[i] != byte((base+uint64(i))*3) {
			t.Fatalf("byte %d of the read is %#x, want %#x", i, got[i], byte((base+uint64(i))*3))
		}
	}
	if len(sizes) != 8 || slices.Max(sizes) != 512 {
		t.Errorf("completion payloads %v, want 8 of 512 bytes", sizes)
	}
	if len(heard) != 1 || heard[0] != [2]int{512, 512} {
		t.Errorf("OnMPS heard %v, want [[512 512]]", heard)
	}
}
