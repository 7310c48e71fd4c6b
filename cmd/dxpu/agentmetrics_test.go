package main

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/app/labnet"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// TestBridgeAgentMetrics runs a manager and two agents as shipped, both
// with --metrics: a lent GPU's pair shows on both agents' /metrics with the
// counter families `dxpu bridge --metrics` serves, labelled with the pair
// and the role, moving with the traffic a copy check sends over it, beside
// the agent's own gauges (dxpu_agent_pairs, dxpu_agent_pairs_up). Once the
// allocation is freed (the manager removes the pair from both agents) the
// pair's series are gone and the gauges say 0. The agent had no --metrics:
// a box serving many pairs showed none of their counters.
func TestBridgeAgentMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three daemons")
	}
	t.Parallel()
	ports := freePorts(t, "tcp", 2)
	boxMetrics, hostMetrics := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	l := newAgentLab(t, nil, nil, []string{"--metrics", boxMetrics}, []string{"--metrics", hostMetrics})
	scrape := func(addr string) map[string]float64 {
		t.Helper()
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s/metrics: %s", addr, resp.Status)
		}
		m, err := labnet.ParseSamples(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	// pairSeries lists the series of m labelled with the pair.
	pairSeries := func(m map[string]float64, pair uint32) []string {
		var out []string
		for s := range m {
			if strings.Contains(s, fmt.Sprintf(`pair="%d"`, pair)) {
				out = append(out, s)
			}
		}
		return out
	}
	agents := []struct{ role, addr string }{{"gpu", boxMetrics}, {"host", hostMetrics}}
	for _, ag := range agents {
		m := scrape(ag.addr)
		if v, ok := m[fmt.Sprintf(`dxpu_agent_pairs{role="%s"}`, ag.role)]; !ok || v != 0 {
			t.Errorf("%s agent before any allocation: dxpu_agent_pairs %v (exported: %t), want 0", ag.role, v, ok)
		}
	}

	a, err := l.c.Allocate(l.ctx, pool.Request{Host: "h1", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	pair := a.GPUs[0].Pair
	series := func(name, role string) string {
		return fmt.Sprintf(`%s{pair="%d",role="%s"}`, name, pair, role)
	}
	for _, ag := range agents {
		waitfor.Until(t, ag.role+" agent's pair up on its /metrics", func() bool {
			m := scrape(ag.addr)
			return m[fmt.Sprintf(`dxpu_agent_pairs{role="%s"}`, ag.role)] == 1 && m[fmt.Sprintf(`dxpu_agent_pairs_up{role="%s"}`, ag.role)] == 1
		})
	}
	before := scrape(hostMetrics)[series("dxpu_bridge_tlps_sent_total", "host")]
	data := make([]byte, 64<<10)
	for i := range data {
		data[i] = byte(i*7 + 3)
	}
	var back struct {
		Data []byte `json:"data"`
	}
	body := fmt.Sprintf(`{"offset":0,"data":%q}`, base64.StdEncoding.EncodeToString(data))
	if code := l.hostCall(t, http.MethodPost, fmt.Sprintf("/agent/v1/pairs/%d/copy-check", pair), body, &back); code != http.StatusOK || len(back.Data) != len(data) {
		t.Fatalf("copy check of 64 KiB: HTTP %d, %d bytes back", code, len(back.Data))
	}
	// 64 KiB written at --max-payload 512 is 128 TLPs at least, each way
	// counted on the end that sent and the end that took it.
	host, box := scrape(hostMetrics), scrape(boxMetrics)
	if sent := host[series("dxpu_bridge_tlps_sent_total", "host")] - before; sent < 128 {
		t.Errorf("host agent: %s moved by %v over a 64 KiB copy check, want 128 or more", series("dxpu_bridge_tlps_sent_total", "host"), sent)
	}
	if got := box[series("dxpu_bridge_tlps_received_total", "gpu")]; got < 128 {
		t.Errorf("box agent: %s = %v after a 64 KiB copy check, want 128 or more", series("dxpu_bridge_tlps_received_total", "gpu"), got)
	}
	for _, ag := range []struct {
		role string
		m    map[string]float64
	}{{"host", host}, {"gpu", box}} {
		// The families of `dxpu bridge --metrics`, gauges and drop
		// reasons included.
		for _, name := range []string{"dxpu_bridge_frames_sent_total", "dxpu_bridge_frames_received_total", "dxpu_bridge_dropped_foreign_source_total",
			"dxpu_bridge_dropped_forged_total", "dxpu_bridge_tags_in_use", "dxpu_bridge_srtt_seconds", "dxpu_bridge_timer_late_total"} {
			if _, ok := ag.m[series(name, ag.role)]; !ok {
				t.Errorf("%s agent's /metrics lacks %s", ag.role, series(name, ag.role))
			}
		}
		// On Linux the kernel steers the pair's frames to a socket of
		// its own; the copy check above crossed it (frames of a steered
		// pair reaching the shared socket are dropped as unknown).
		if v := ag.m[fmt.Sprintf(`dxpu_agent_pairs_steered{role="%s"}`, ag.role)]; runtime.GOOS == "linux" && v != 1 {
			t.Errorf("%s agent: dxpu_agent_pairs_steered %v, want 1", ag.role, v)
		}
		if v, ok := ag.m[fmt.Sprintf(`dxpu_agent_dropped_unknown_pair_total{role="%s"}`, ag.role)]; !ok {
			t.Errorf("%s agent's /metrics lacks dxpu_agent_dropped_unknown_pair_total (%v)", ag.role, v)
		}
	}

	if _, err := l.c.Free(l.ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	// Free returns once the saga removed the pair from both agents.
	for _, ag := range agents {
		m := scrape(ag.addr)
		if s := pairSeries(m, pair); len(s) != 0 {
			t.Errorf("%s agent's /metrics after the pair's removal still has %d series of it, e.g. %s", ag.role, len(s), s[0])
		}
		if v := m[fmt.Sprintf(`dxpu_agent_pairs{role="%s"}`, ag.role)]; v != 0 {
			t.Errorf("%s agent after the pair's removal: dxpu_agent_pairs %v, want 0", ag.role, v)
		}
		if v := m[fmt.Sprintf(`dxpu_agent_pairs_up{role="%s"}`, ag.role)]; v != 0 {
			t.Errorf("%s agent after the pair's removal: dxpu_agent_pairs_up %v, want 0", ag.role, v)
		}
	}
}
