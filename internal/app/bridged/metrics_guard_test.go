package bridged

import (
	"bytes"
	"context"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/internal/app/httpguard"
	"github.com/dxpu/dxpu/internal/app/httpguard/guardtest"
)

// TestMetricsConnectionCaps (finding F4): the bridge's --metrics server set
// only ReadHeaderTimeout; 5000 connections were held 80 s+. It caps
// connections per address (the excess refused at once, another address
// still served) and closes idle ones after its idle timeout.
func TestMetricsConnectionCaps(t *testing.T) {
	t.Parallel()
	if !guardtest.IsLoopbackAliasUsable() {
		t.Skip("127.0.0.2 is not usable here")
	}
	ctx, cancel := context.WithCancel(t.Context())
	daemons := make(chan *Daemon, 1)
	done := make(chan error, 1)
	const perAddr, idle = 3, 300 * time.Millisecond
	go func() {
		done <- Run(ctx, Options{Role: bridge.RoleGPU, Pair: 1, Listen: netip.MustParseAddrPort("127.0.0.1:0"),
			Peer: netip.MustParseAddrPort("127.0.0.1:9"), PCIe: PCIe{Kind: KindMemory}, MemSize: 4096,
			Key: bytes.Repeat([]byte{0x5a}, 32), Metrics: "127.0.0.1:0",
			MetricsServer: httpguard.Config{MaxConnsPerAddr: perAddr, IdleTimeout: idle},
			Ready:         func(d *Daemon) { daemons <- d }})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("bridge stopped with %v", err)
		}
	}()
	var d *Daemon
	select {
	case d = <-daemons:
	case err := <-done:
		done <- err
		t.Fatalf("bridge stopped before it was ready: %v", err)
	}
	guardtest.CheckServer(t, d.MetricsAddr().String(), "/metrics", perAddr, idle, http.StatusOK)
}
