package switchd

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/switchtest"
	"github.com/dxpu/dxpu/internal/syncbuf"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/tlp/encap"
)

// TestInstallKeepsRulesOnBadTable: a table that does not compile is an
// error and leaves the rules in force.
func TestInstallKeepsRulesOnBadTable(t *testing.T) {
	t.Parallel()
	ports := switchtest.Ports(map[string]uint32{switchtest.P1: 1, switchtest.P2: 2, switchtest.P3: 3})
	fwd := switching.NewForwarder(0)
	fwd.SetPorts(ports)
	if _, err := install(fwd, switchtest.Table(), ports); err != nil {
		t.Fatal(err)
	}
	frame := switchtest.Frame(switchtest.MAC(1, 1), switchtest.PortMAC(1), -1, nil, encap.MsgTLP, switchtest.PairPlain, false)
	forward := func() switching.Result {
		buf := make([]byte, switching.Headroom+len(frame))
		copy(buf[switching.Headroom:], frame)
		return fwd.Forward(buf, switching.Headroom, 1)
	}
	if r := forward(); r.Verdict != switching.VerdictForward || r.Egress != 2 {
		t.Fatalf("before: %+v, want forwarded to port 2", r)
	}
	bad := switchtest.Table()
	bad.Version = 2
	bad.Pairs = append(bad.Pairs, bad.Pairs[0]) // duplicate ID: invalid
	if _, err := install(fwd, bad, ports); err == nil || !strings.Contains(err.Error(), "version 2") {
		t.Fatalf("invalid table installed: %v", err)
	}
	if r := forward(); r.Verdict != switching.VerdictForward || r.Egress != 2 {
		t.Fatalf("after a refused table: %+v, want the old rules in force", r)
	}
}

// TestOptionErrors: options that cannot work are usage errors.
func TestOptionErrors(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Mode: "udp"}, "exactly one of --table and --manager"},
		{Options{Mode: "udp", TableFile: "t", Manager: "http://m"}, "exactly one"},
		{Options{Mode: "xdp", TableFile: "t"}, "needs at least one --port"},
		{Options{Mode: "packet", TableFile: "t", Ports: []string{"dxpu-no-such-if"}}, "dxpu-no-such-if"},
		{Options{Mode: "ebpf", TableFile: "t", Ports: []string{"lo"}}, "--mode"},
		{Options{Mode: "udp", TableFile: filepath.Join(t.TempDir(), "missing.json"), UDPListen: "127.0.0.1:0"}, "missing.json"},
	} {
		err := Run(ctx, tc.o)
		if !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want a usage error naming %q", tc.o, err, tc.want)
		}
	}
}

// TestRunUDPRelay runs the daemon as the demo's UDP relay with a table
// file: the table is in force (its version in the metrics) and the daemon
// stops cleanly when ctx ends.
func TestRunUDPRelay(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(switchtest.Table())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "table.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Mode: "udp", TableFile: path, UDPListen: "127.0.0.1:0", Metrics: "127.0.0.1:0",
			Ready: func(a net.Addr) { ready <- a }})
	}()
	var metrics net.Addr
	select {
	case metrics = <-ready:
	case err := <-done:
		t.Fatalf("switch stopped before it was ready: %v", err)
	case <-time.After(waitfor.Stall):
		t.Fatalf("switch neither ready nor stopped within %v", waitfor.Stall)
	}
	resp, err := http.Get("http://" + metrics.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "dxpu_switch_table_version 1\n") {
		t.Fatalf("table version 1 not in force:\n%s", body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("switch stopped with %v", err)
		}
	case <-time.After(waitfor.Stall):
		t.Fatalf("switch still running %v after its context ended", waitfor.Stall)
	}
}

// fakeManager serves GET /v1/table with the manager's watch semantics
// (long-poll until the version differs) and reports each version it
// served.
type fakeManager struct {
	mu      sync.Mutex
	current table.Table
	changed chan struct{} // closed at the next set
	served  chan uint64
}

func newFakeManager(t table.Table) *fakeManager {
	return &fakeManager{current: t, changed: make(chan struct{}), served: make(chan uint64, 64)}
}

func (m *fakeManager) set(t table.Table) {
	m.mu.Lock()
	m.current = t
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
}

func (m *fakeManager) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	m.mu.Lock()
	if q.Get("watch") == "1" {
		v, _ := strconv.ParseUint(q.Get("version"), 10, 64)
		for m.current.Version == v {
			changed := m.changed
			m.mu.Unlock()
			select {
			case <-changed:
			case <-r.Context().Done():
				return
			}
			m.mu.Lock()
		}
	}
	t := m.current
	m.mu.Unlock()
	json.NewEncoder(w).Encode(t)
	m.served <- t.Version
}

// TestWatchManagerAppliesVersions: the switch applies the manager's table
// and every later version, and skips invalid ones.
func TestWatchManagerAppliesVersions(t *testing.T) {
	t.Parallel()
	m := newFakeManager(*switchtest.Table())
	srv := httptest.NewServer(m)
	defer srv.Close()
	applied := make(chan uint64, 10)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go WatchManager(ctx, ctlclient.New(srv.URL, ""), func(tb *table.Table) { applied <- tb.Version }, nil)
	wait := func(want uint64) {
		t.Helper()
		select {
		case v := <-applied:
			if v != want {
				t.Fatalf("applied version %d, want %d", v, want)
			}
		case <-time.After(waitfor.Stall):
			t.Fatalf("version %d not applied within %v", want, waitfor.Stall)
		}
	}
	wait(1)
	bad := *switchtest.Table()
	bad.Version = 2
	bad.Pairs = append(bad.Pairs, bad.Pairs[0]) // duplicate ID: invalid
	m.set(bad)
	for v := uint64(0); v != 2; { // the watcher has fetched the invalid version
		select {
		case v = <-m.served:
		case <-time.After(waitfor.Stall):
			t.Fatalf("the invalid version not fetched within %v", waitfor.Stall)
		}
	}
	t3 := *switchtest.Table()
	t3.Version = 3
	t3.Pairs = t3.Pairs[:1]
	m.set(t3)
	wait(3)
}

// TestUDPLeavesOutPairsWithoutIP: a UDP switch relays to and from each
// endpoint's ip:udp_port, so a pair with an endpoint without an IP (or
// with 0.0.0.0) is left out, with one warning naming the pair and its
// side; it was loaded and dropped the pair's traffic (a box registered
// with an agent_url and no bridge.ip). The other pairs are in force.
func TestUDPLeavesOutPairsWithoutIP(t *testing.T) {
	t.Parallel()
	mac := func(b byte) string { return net.HardwareAddr{2, 0, 0, 0, 0, b}.String() }
	ep := func(b byte, ip string) map[string]any {
		e := map[string]any{"port": "udp", "mac": mac(b)}
		if ip != "" {
			e["ip"] = ip
		}
		return e
	}
	tb := map[string]any{"version": 3, "pairs": []map[string]any{
		{"id": 1, "host": ep(1, "127.0.0.1"), "gpu": ep(2, "127.0.0.2")},
		{"id": 2, "host": ep(3, "127.0.0.3"), "gpu": ep(4, "")},
		{"id": 3, "host": ep(5, "0.0.0.0"), "gpu": ep(6, "127.0.0.6")},
	}}
	b, err := json.Marshal(tb)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "table.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Mode: "udp", TableFile: path, UDPListen: "127.0.0.1:0", Log: slog.New(slog.NewTextHandler(&logs, nil)),
			Ready: func(net.Addr) { close(ready) }})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("switch stopped before it was ready: %v", err)
	case <-time.After(waitfor.Stall):
		t.Fatalf("switch neither ready nor stopped within %v", waitfor.Stall)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("switch stopped with %v", err)
	}
	out := logs.String()
	for _, want := range []string{"pairs[1] (id 2) gpu ip none", "pairs[2] (id 3) host ip 0.0.0.0"} {
		if strings.Count(out, want) != 1 || !strings.Contains(out, "level=WARN msg=\"switch: pair not installed\"") {
			t.Errorf("log: want one warning with %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "msg=\"switch: table in force\" version=3 pairs=1") {
		t.Errorf("log: want table version 3 in force with 1 pair:\n%s", out)
	}

	// The data path itself: only pair 1 is installed.
	dp, err := newUDPDataPath("127.0.0.1:0", 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer dp.close()
	var tt table.Table
	if err := json.Unmarshal(b, &tt); err != nil {
		t.Fatal(err)
	}
	skipped, err := dp.apply(&tt)
	if err != nil || len(skipped) != 2 || !errors.Is(skipped[0], switching.ErrNoIP) || !errors.Is(skipped[1], switching.ErrNoIP) {
		t.Fatalf("apply: skipped %v, err %v; want pairs 2 and 3 skipped for ErrNoIP", skipped, err)
	}
	var ids []uint32
	dp.PairCounters(func(id uint32, _ switching.Counters) { ids = append(ids, id) })
	if len(ids) != 1 || ids[0] != 1 {
		t.Errorf("pairs installed: %v, want [1]", ids)
	}
}
