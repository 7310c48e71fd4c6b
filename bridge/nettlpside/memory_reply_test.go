package nettlpside

import (
	"context"
	"sync"
	"testing"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/tlp"
)

// readsThrough sends reads of size bytes, one per tag 0..n-1, the read of
// tag i at base+i*size, through the host runner r at once, and checks that
// their completions bring back mem's bytes: want(addr) is the byte at addr.
func readsThrough(t *testing.T, ctx context.Context, rs [2]*driver.Runner, n, size int, base uint64, want func(uint64) byte) {
	t.Helper()
	var mu sync.Mutex
	got := make([][]byte, n)
	have := 0
	rs[0].OnTLP = func(v tlp.View) {
		mu.Lock()
		defer mu.Unlock()
		if v.Kind() != tlp.CplD || int(v.Tag()) >= n {
			t.Errorf("got %v tag %d, want CplDs of tags below %d", v.Kind(), v.Tag(), n)
			return
		}
		got[v.Tag()] = append(got[v.Tag()], v.Payload()...)
		have += len(v.Payload())
	}
	reqs := make([][]byte, n)
	for i := range reqs {
		var err error
		reqs[i], err = (&tlp.Packet{Kind: tlp.MRd, Addr64: true, Length: uint16(size / 4), Tag: uint16(i), FirstBE: 0xf, LastBE: 0xf, Address: base + uint64(i*size)}).AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := driver.SendManyWait(ctx, rs[0], reqs); err != nil {
		t.Fatal(err)
	}
	waitfor.Progress(t, "the reads' completions", func() (bool, uint64) {
		mu.Lock()
		defer mu.Unlock()
		return have >= n*size, uint64(have)
	})
	mu.Lock()
	defer mu.Unlock()
	for i, b := range got {
		if len(b) != size {
			t.Fatalf("read %d brought %d bytes, want %d", i, len(b), size)
		}
		for j, c := range b {
			if a := base + uint64(i*size+j); c != want(a) {
				t.Fatalf("read %d byte %d (address %#x) is %#x, want %#x", i, j, a, c, want(a))
			}
		}
	}
}

// runPair runs the pair's runners (and fns) until the test ends, once the
// link is up.
func runPair(t *testing.T, rs [2]*driver.Runner, fns ...func(context.Context) error) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, f := range append([]func(context.Context) error{rs[0].Run, rs[1].Run}, fns...) {
		wg.Go(func() { _ = f(ctx) })
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	waitfor.Until(t, "link up", func() bool { return rs[0].State() == bridge.StateUp && rs[1].State() == bridge.StateUp })
	return ctx
}

// The memory device answers in the runner's turn that delivered the
// reads (driver.Runner.Reply), with no goroutine of its own: with its Run
// never started, 4 reads of 4 KiB still come back whole. When it served a
// queue from Run's goroutine, they never came.
func TestMemoryDeviceAnswersInTurn(t *testing.T) {
	const base = 0x20_0000_0000
	rs, _, _ := framingPair(t)
	pattern := func(a uint64) byte { return byte(a * 5) }
	mem, err := nettlp.NewSparseMemory(base, 1<<20, pattern)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := NewMemoryDevice(rs[1], mem, nettlp.CompleterConfig{CompleterID: tlp.NewID(3, 0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := runPair(t, rs) // no dev.Run
	readsThrough(t, ctx, rs, 4, 4096, base, pattern)
	if d := dev.Deferred(); d != 0 {
		t.Errorf("%d completions deferred with room for all of them", d)
	}
}

// What the bridge cannot take in the turn (a GPU side queueing 8
// completions, 32 reads of 16 at once) waits in the backlog that Run
// hands over: every read comes back whole and right. With the backlog
// dropped, reads came back short.
func TestMemoryDeviceBacklog(t *testing.T) {
	const base = 0x20_0000_0000
	rs, _, _ := framingPairWith(t, func(c *bridge.Config) {
		if c.Role == bridge.RoleGPU {
			c.TxQueue = 8
		}
	})
	pattern := func(a uint64) byte { return byte(a*11 + 3) }
	mem, err := nettlp.NewSparseMemory(base, 1<<20, pattern)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := NewMemoryDevice(rs[1], mem, nettlp.CompleterConfig{CompleterID: tlp.NewID(3, 0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := runPair(t, rs, dev.Run)
	readsThrough(t, ctx, rs, 32, 4096, base, pattern)
	if dev.Deferred() == 0 {
		t.Errorf("no completion deferred: 512 completions fit a queue of 8 in their turn?")
	}
}

// A write lands when it arrives, before a read behind it is answered: the
// read sees the write's bytes.
func TestMemoryDeviceReadAfterWrite(t *testing.T) {
	const base = 0x20_0000_0000
	rs, _, _ := framingPair(t)
	mem, err := nettlp.NewSparseMemory(base, 1<<20, func(uint64) byte { return 0 })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewMemoryDevice(rs[1], mem, nettlp.CompleterConfig{CompleterID: tlp.NewID(3, 0, 0)}); err != nil {
		t.Fatal(err)
	}
	ctx := runPair(t, rs)
	data := make([]byte, 256)
	for i := range data {
		data[i] = byte(i + 1)
	}
	wr, err := (&tlp.Packet{Kind: tlp.MWr, Addr64: true, FirstBE: 0xf, LastBE: 0xf, Address: base, Data: data}).AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := driver.SendWait(ctx, rs[0], wr); err != nil {
		t.Fatal(err)
	}
	readsThrough(t, ctx, rs, 1, 256, base, func(a uint64) byte { return byte(a - base + 1) })
}
