package bridgeagent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/internal/app/httpguard"
	"github.com/dxpu/dxpu/internal/app/httpguard/guardtest"
)

// TestMetricsConnectionCaps: the agent's --metrics server is bounded as
// the bridge's and the switch's (httpguard): connections per address
// capped (the excess refused at once, another address still served), idle
// ones closed after its idle timeout. A scrape does not wait for the
// agent's lock, which a pair's programming or removal holds through a
// hot-plug.
func TestMetricsConnectionCaps(t *testing.T) {
	t.Parallel()
	if !guardtest.IsLoopbackAliasUsable() {
		t.Skip("127.0.0.2 is not usable here")
	}
	const perAddr, idle = 3, 300 * time.Millisecond
	o := Options{Role: bridge.RoleGPU, AgentListen: "127.0.0.1:0", Insecure: true, Credential: "cred",
		Listen: netip.MustParseAddrPort("127.0.0.1:0"), Metrics: "127.0.0.1:0",
		MetricsServer: httpguard.Config{MaxConnsPerAddr: perAddr, IdleTimeout: idle},
		Log:           slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan *Agent, 1)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o, func(a *Agent, _ net.Addr) { ready <- a }) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var a *Agent
	select {
	case a = <-ready:
	case err := <-done:
		done <- err
		t.Fatalf("agent stopped before it served: %v", err)
	}
	if a.MetricsAddr() == nil {
		t.Fatal("no metrics address with Options.Metrics set")
	}
	addr := a.MetricsAddr().String()

	a.mu.Lock()
	scraped := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			resp.Body.Close()
		}
		scraped <- err
	}()
	select {
	case err := <-scraped:
		if err != nil {
			t.Errorf("scrape while the agent's lock is held: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("a scrape waited 10s for the agent's lock")
	}
	a.mu.Unlock()
	http.DefaultClient.CloseIdleConnections()

	guardtest.CheckServer(t, addr, "/metrics", perAddr, idle, http.StatusOK)
}

// TestMetricsFollowPairs: the registry holds a series set per programmed
// pair, consistent across pairs (a pedantic registry gathers it without
// error), and a removed pair's series leave with it; the agent's gauges
// count the pairs.
func TestMetricsFollowPairs(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	a, err := Start(ctx, Options{Role: bridge.RoleGPU, PCIe: PCIeMemory, MemSize: 1 << 20, Listen: netip.MustParseAddrPort("127.0.0.1:0"),
		Switch: netip.MustParseAddrPort("127.0.0.1:9"), Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); a.Wait() }()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(a.collector()); err != nil {
		t.Fatal(err)
	}
	// gather returns the pairs labelled on dxpu_bridge_frames_sent_total
	// and the value of dxpu_agent_pairs.
	gather := func() (map[string]bool, float64) {
		t.Helper()
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		pairs, n := map[string]bool{}, -1.0
		for _, f := range fams {
			switch f.GetName() {
			case "dxpu_bridge_frames_sent_total":
				for _, m := range f.GetMetric() {
					for _, l := range m.GetLabel() {
						if l.GetName() == "pair" {
							pairs[l.GetValue()] = true
						}
					}
				}
			case "dxpu_agent_pairs":
				n = f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return pairs, n
	}
	pair := func(id uint32) manager.Pair {
		return manager.Pair{ID: id, GPU: fmt.Sprintf("g%d", id), Key: manager.PairKey{Generation: 1, Key: [manager.PairKeySize]byte{byte(id)}}}
	}
	for _, id := range []uint32{3, 5, 9} {
		if err := a.ProgramPair(ctx, pair(id)); err != nil {
			t.Fatal(err)
		}
	}
	if pairs, n := gather(); len(pairs) != 3 || !pairs["3"] || !pairs["5"] || !pairs["9"] || n != 3 {
		t.Errorf("3 pairs programmed: series of pairs %v, dxpu_agent_pairs %v", pairs, n)
	}
	if err := a.RemovePair(ctx, pair(5)); err != nil {
		t.Fatal(err)
	}
	if pairs, n := gather(); len(pairs) != 2 || pairs["5"] || n != 2 {
		t.Errorf("pair 5 removed: series of pairs %v, dxpu_agent_pairs %v", pairs, n)
	}
}
