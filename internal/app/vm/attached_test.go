package vm

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/vmm"
	"github.com/dxpu/dxpu/bridge/vmm/qemuproxy"
	"github.com/dxpu/dxpu/emu/realtime"
)

// cfgRead plays QEMU: one PCI_CFGREAD of 4 bytes at off on fd, and its RET.
func cfgRead(t *testing.T, fd int, off uint32) uint32 {
	t.Helper()
	if _, err := unix.Write(fd, qemuproxy.AppendMsg(nil, qemuproxy.Msg{Cmd: qemuproxy.CfgRead, Cfg: qemuproxy.CfgAccess{Addr: off, Len: 4}})); err != nil {
		t.Fatal(err)
	}
	var b [qemuproxy.HeaderLen + 8]byte
	for got := 0; got < len(b); {
		n, err := unix.Read(fd, b[got:])
		if err != nil || n == 0 {
			t.Fatalf("reading RET: %v (%d bytes)", err, n)
		}
		got += n
	}
	return uint32(binary.LittleEndian.Uint64(b[qemuproxy.HeaderLen:]))
}

// TestAttachedGPU: a proxy socket served on a bridge that runs before and
// after it (its owner keeps the runner's hooks and passes TLPs and events
// on): config reads reach the GPU; once the GPU side is gone they read all
// ones; QEMU closing the socket ends Serve; a bridge whose link is not up
// is refused.
func TestAttachedGPU(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := (&AttachedGPU{}).Serve(ctx, nil); !errors.Is(err, vmm.ErrConfig) {
		t.Fatalf("no runner: %v", err)
	}
	ht, gt, err := loopbackPair(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultBridge(9)
	cfg.CompletionTimeout = 300 * time.Millisecond
	emu, err := StartEmulatedGPU(ctx, gt, cfg, realtime.BridgedGPUConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Stop()
	cfg.Role = bridge.RoleHost
	b, err := bridge.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := driver.New(b, ht)
	g := &AttachedGPU{Runner: r, BAR0Size: emu.Config().GPU.Model.BAR0Size, CompletionTimeout: 500 * time.Millisecond}
	up := make(chan struct{}, 1)
	r.OnTLP = g.DeliverTLP
	r.OnEvent = func(e bridge.Event) {
		g.LinkEvent(e)
		if e.Kind == bridge.EventLinkUp {
			up <- struct{}{}
		}
	}

	// Before the link is up: refused, as a device_add would be.
	conn, qf, err := proxyPair("early")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Serve(ctx, conn); !errors.Is(err, ErrLinkDown) {
		t.Fatalf("Serve on a bridge that is not up: %v", err)
	}
	qf.Close()

	rctx, stop := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- r.Run(rctx) }()
	defer func() { stop(); <-runDone }()
	select {
	case <-up:
	case <-ctx.Done():
		t.Fatal("the pair's link never came up")
	}
	conn, qf, err = proxyPair("gpu")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- g.Serve(ctx, conn) }()
	fd := int(qf.Fd())
	if id := cfgRead(t, fd, 0); id != 0x2330_10de {
		t.Fatalf("vendor and device read %#x, want 0x233010de", id)
	}
	emu.Stop()
	if id := cfgRead(t, fd, 0); id != 0xffff_ffff {
		t.Fatalf("with the GPU side gone the IDs read %#x, want all ones", id)
	}
	if s := g.Stats(); s == nil || s.Timeouts.Load()+s.ErrorCompletions.Load() == 0 {
		t.Fatalf("the port answered no access with all ones: %+v", s)
	}
	qf.Close()
	if err := <-served; err != nil {
		t.Fatalf("Serve after QEMU closed the socket: %v", err)
	}
	g.DeliverTLP(nil) // no function: dropped
}
