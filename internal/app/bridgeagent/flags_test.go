package bridgeagent

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/internal/app/apperr"
)

// TestFillRefusesBadFlags: a negative timer was replaced by its default
// in silence, --ports took 1..32 where the manager registers a host's
// ports as 32..65536, and an --mtu too small for one TLP passed the start
// and failed every pair's programming. Each is a usage error naming the
// flag and the value given (and the default where 0 took it).
func TestFillRefusesBadFlags(t *testing.T) {
	t.Parallel()
	listen := netip.MustParseAddrPort("127.0.0.1:4791")
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Keepalive: -5 * time.Millisecond}, "--keepalive -5ms: must not be negative"},
		{Options{DeadAfter: -time.Second}, "--dead-after -1s: must not be negative"},
		{Options{CompletionTimeout: -time.Second}, "--completion-timeout -1s: must not be negative"},
		{Options{Keepalive: 2 * time.Second}, "--dead-after 1s (the default, for 0) must exceed --keepalive 2s"},
		{Options{Keepalive: time.Second, DeadAfter: time.Second}, "--dead-after 1s must exceed --keepalive 1s"},
		{Options{Ports: 1}, "--ports 1: want 32..65536"},
		{Options{Ports: 31}, "--ports 31: want 32..65536"},
		{Options{Ports: 65537}, "--ports 65537: want 32..65536"},
		{Options{Ports: -1}, "--ports -1: want 32..65536"},
		{Options{MTU: 10}, "--mtu 10: bridge: bad config: MTU: 10 cannot carry one"},
	} {
		o := c.o
		o.Role, o.Listen = bridge.RoleHost, listen
		if err := o.fill(); !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want a usage error with %q", c.o, err, c.want)
		}
	}
	// As registered: 32 by default, up to 65536; the emulated host takes
	// GPUs on the first 32, a q35 guest on the first 8.
	for _, c := range []struct{ ports, slots int }{{0, 32}, {32, 32}, {64, 32}, {65536, 32}} {
		o := Options{Role: bridge.RoleHost, Listen: listen, Ports: c.ports}
		if err := o.fill(); err != nil || o.slots() != c.slots {
			t.Errorf("--ports %d: %v, %d slots; want %d", c.ports, err, o.slots(), c.slots)
		}
	}
}

// TestMorePortsThanSlots: a host registered with 64 ports runs its agent
// with --ports 64: the emulated host comes up with its 32 hot-plug ports,
// and a pair on a port beyond them is refused, naming the ports it has.
func TestMorePortsThanSlots(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	a, err := Start(ctx, Options{Role: bridge.RoleHost, Ports: 64, Listen: netip.MustParseAddrPort("127.0.0.1:0"), Credential: "c"})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	defer a.Wait()
	defer cancel()
	if err := a.check(manager.Pair{ID: 1, HostPort: 31}); err != nil {
		t.Errorf("host_port 31: %v", err)
	}
	if err := a.check(manager.Pair{ID: 2, HostPort: 40}); !errors.Is(err, ErrWrongBridge) || !strings.Contains(err.Error(), "ports 0..31") {
		t.Errorf("host_port 40: %v, want ErrWrongBridge naming ports 0..31", err)
	}
}

// TestManagerURLIsUsage: a --manager that is no URL is a usage error
// (exit 2), as ctl's, not a failed run.
func TestManagerURLIsUsage(t *testing.T) {
	t.Parallel()
	for _, m := range []string{"notaurl", "ftp://10.0.0.1", "http://10.0.0.1:7700"} { // the last: http without --insecure
		o := Options{Role: bridge.RoleGPU, Listen: netip.MustParseAddrPort("127.0.0.1:0"), Credential: "c", Manager: m}
		ctx, cancel := context.WithCancel(t.Context())
		a, err := Start(ctx, o)
		cancel()
		if err == nil {
			a.Wait()
		}
		if !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), "--manager") {
			t.Errorf("--manager %s: %v, want a usage error naming it", m, err)
		}
	}
}

// TestAgentListenInUse: with --agent-listen on a port already in use, the
// agent logged "bridge agent running" (and a VM host booted its guest)
// before it found out. It binds first: one error naming the flag and the
// address, and nothing logged as running.
func TestAgentListenInUse(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	var log bytes.Buffer
	o := Options{Role: bridge.RoleHost, AgentListen: busy.Addr().String(), Insecure: true, Credential: "c",
		Listen: netip.MustParseAddrPort("127.0.0.1:0"), Log: slog.New(slog.NewTextHandler(&log, nil))}
	err = Run(t.Context(), o, nil)
	if err == nil || !strings.Contains(err.Error(), "--agent-listen") || !strings.Contains(err.Error(), busy.Addr().String()) || strings.Contains(err.Error(), "\n") {
		t.Errorf("Run: %v, want one line naming --agent-listen %s", err, busy.Addr())
	}
	if strings.Contains(log.String(), "running") {
		t.Errorf("logged before the API was bound:\n%s", log.String())
	}
	// A bad flag beside it is a usage error, whatever the address.
	o.Keepalive = -time.Millisecond
	if err := Run(t.Context(), o, nil); !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), "--keepalive") {
		t.Errorf("Run with --keepalive -1ms: %v, want a usage error naming it", err)
	}
}
