package e2ebench

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/emu/cuda"
)

// TestCopyEndsWhenThePathFails closes the GPU side's socket under a
// world over the bridge pair: the next copy fails with ErrDeviceLost (the
// host saw a surprise removal) instead of waiting forever, and the path
// names the bridge that stopped.
func TestCopyEndsWhenThePathFails(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var gpuSide driver.Transport
	open := func() (driver.Transport, driver.Transport, error) {
		h, g, err := loopbackNet{}.bridges(true) // the sockets bench e2e uses
		mu.Lock()
		gpuSide = g
		mu.Unlock()
		return h, g, err
	}
	o := Options{Loopback: true}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	wd, err := newWorld(open, bridgeConfig(o.MTU), 1<<20, o)
	if err != nil {
		t.Fatal(err)
	}
	defer wd.close()
	if _, err := wd.copyTime(h2d, 64<<10); err != nil {
		t.Fatalf("copy before the failure: %v", err)
	}
	mu.Lock()
	gpuSide.Close()
	mu.Unlock()
	_, err = wd.copyTime(d2h, 1<<20)
	if !errors.Is(err, cuda.ErrDeviceLost) {
		t.Fatalf("copy after the GPU side's socket closed: %v, want %v", err, cuda.ErrDeviceLost)
	}
	if perr := wd.path.Err(); perr == nil || !strings.Contains(perr.Error(), "gpu bridge") {
		t.Fatalf("path error %v: want the GPU bridge named", perr)
	}
}

// TestTwoClocksCopyWhole: by default the GPU runs in a simulator and on
// a goroutine of its own (a GPU box is another machine): 1 MiB of random
// bytes copied to the GPU and back over the bridge pair comes back whole,
// and both simulators ran. (-race: nothing but the bridges' frames and
// the clocks' locks crosses between the two sides.)
func TestTwoClocksCopyWhole(t *testing.T) {
	t.Parallel()
	o := Options{Loopback: true}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	const n = 1 << 20
	wd, err := newWorld(func() (driver.Transport, driver.Transport, error) { return loopbackNet{}.bridges(true) }, bridgeConfig(o.MTU), n, o)
	if err != nil {
		t.Fatal(err)
	}
	defer wd.close()
	if wd.gclk == nil || wd.gclk.S == wd.clk.S {
		t.Fatal("the GPU shares the host's clock")
	}
	want := make([]byte, n)
	rand.NewChaCha8([32]byte{1}).Read(want)
	back := wd.c.MallocHost(n)
	mem := wd.w.Host.Mem
	mem.Write(wd.src, want)
	if err := wd.c.MemcpyHtoD(wd.st, wd.dst, wd.src, n); err != nil {
		t.Fatal(err)
	}
	if err := wd.c.MemcpyDtoH(wd.st, back, wd.dst, n); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	mem.Read(back, got)
	if !bytes.Equal(got, want) {
		i := 0
		for got[i] == want[i] {
			i++
		}
		t.Fatalf("1 MiB to the GPU and back: first difference at byte %d", i)
	}
	var gpuNow time.Duration
	wd.onGPU(func() { gpuNow = wd.gclk.S.Now() })
	if wd.clk.S.Now() <= 0 || gpuNow <= 0 {
		t.Fatalf("virtual time: host %v, GPU %v: want both simulators run", wd.clk.S.Now(), gpuNow)
	}
}
