package switchd

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/app/httpguard"
	"github.com/dxpu/dxpu/internal/app/httpguard/guardtest"
	"github.com/dxpu/dxpu/internal/switchtest"
)

// TestMetricsConnectionCaps (finding F4): the switch's --metrics server set
// only ReadHeaderTimeout; 1000 connections were held 75 s. It caps
// connections per address (the excess refused at once, another address
// still served) and closes idle ones after its idle timeout.
func TestMetricsConnectionCaps(t *testing.T) {
	t.Parallel()
	if !guardtest.IsLoopbackAliasUsable() {
		t.Skip("127.0.0.2 is not usable here")
	}
	b, err := json.Marshal(switchtest.Table())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "table.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	const perAddr, idle = 3, 300 * time.Millisecond
	go func() {
		done <- Run(ctx, Options{Mode: "udp", TableFile: path, UDPListen: "127.0.0.1:0", Metrics: "127.0.0.1:0",
			MetricsServer: httpguard.Config{MaxConnsPerAddr: perAddr, IdleTimeout: idle},
			Ready:         func(a net.Addr) { ready <- a }})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("switch stopped with %v", err)
		}
	}()
	var metrics net.Addr
	select {
	case metrics = <-ready:
	case err := <-done:
		done <- err
		t.Fatalf("switch stopped before it was ready: %v", err)
	}
	guardtest.CheckServer(t, metrics.String(), "/metrics", perAddr, idle, http.StatusOK)
}
