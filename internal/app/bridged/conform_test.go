package bridged_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/internal/app/bridged"
	"github.com/dxpu/dxpu/internal/app/conform"
	"github.com/dxpu/dxpu/tlp/encap"
)

// freeUDPPort returns a loopback UDP address nobody listens on now.
func freeUDPPort(t *testing.T) netip.AddrPort {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort()
}

// TestConformAgainstTheDaemon: the conformance kit finds no rule broken
// by the bridge daemon (a GPU side with a memory device).
func TestConformAgainstTheDaemon(t *testing.T) {
	t.Parallel()
	iut, kit := freeUDPPort(t), freeUDPPort(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pcie, err := bridged.ParsePCIe("memory")
	if err != nil {
		t.Fatal(err)
	}
	doorbell := uint64(0xf000) // the test target, inside the memory
	ready := make(chan struct{})
	daemonErr := make(chan error, 1)
	dctx, stopDaemon := context.WithCancel(ctx)
	go func() {
		daemonErr <- bridged.Run(dctx, bridged.Options{Role: bridge.RoleGPU, Pair: 5, Listen: iut, Peer: kit, PCIe: pcie,
			MemBase: 0, MemSize: 64 << 10, Doorbell: &doorbell, Insecure: true, Keepalive: 50 * time.Millisecond, DeadAfter: time.Second,
			CompletionTimeout: 250 * time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Ready: func(*bridged.Daemon) { close(ready) }})
	}()
	defer func() {
		stopDaemon()
		if err := <-daemonErr; err != nil {
			t.Errorf("bridge daemon: %v", err)
		}
	}()
	select {
	case <-ready:
	case err := <-daemonErr:
		daemonErr <- err
		t.Fatalf("the daemon stopped before it ran: %v", err)
	}
	rep, err := conform.Run(ctx, conform.Options{Peer: "udp:" + iut.String(), Local: kit.String(), Role: encap.RoleGPU, PairID: 5, Doorbell: &doorbell,
		Timers: conform.Timers{Keepalive: 50 * time.Millisecond, DeadAfter: time.Second, CompletionTimeout: 250 * time.Millisecond, Slack: time.Second}})
	if err != nil {
		t.Fatalf("conform: %v", err)
	}
	pass, lnk2 := 0, false
	for _, r := range rep.Results {
		if r.Verdict == conform.Fail {
			t.Errorf("%s failed: %s", r.Rule, r.Reason)
		}
		if r.Verdict == conform.Pass {
			pass++
		}
		lnk2 = lnk2 || r.Rule == "LNK-2"
	}
	if pass < 30 || !lnk2 {
		t.Errorf("only %d rules passed (LNK-2 judged: %v): %+v", pass, lnk2, rep.Results)
	}
	// Through the daemon's test target (--doorbell).
	for _, id := range []string{"TAG-1", "TAG-4", "TAG-5", "ORD-2", "ORD-4", "LNK-4"} {
		if r, _ := rep.Result(id); r.Verdict != conform.Pass {
			t.Errorf("%s through the test target: %s (%s)", id, r.Verdict, r.Reason)
		}
	}
}
