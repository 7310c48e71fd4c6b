package e2ebench

import (
	"errors"
	"strings"
	"sync"
	"testing"

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
