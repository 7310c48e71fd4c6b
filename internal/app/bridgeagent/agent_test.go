package bridgeagent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/manager/agentapi"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/waitfor"
)

const adminToken = "admin-token-for-the-test"

// rig is a manager driving real agents in this process: the saga reaches
// them over HTTP (agentapi), their bridges talk over UDP on loopback.
type rig struct {
	t      *testing.T
	ctx    context.Context
	mgr    *manager.Manager
	mgrURL string
	c      *ctlclient.Client
	host   *Agent
	boxes  []*Agent
	stop   []context.CancelFunc // per box agent
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newRig(t *testing.T, boxGPUs ...int) *rig {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cl, err := agentapi.NewClient(agentapi.ClientConfig{AllowInsecure: true})
	if err != nil {
		t.Fatal(err)
	}
	m, err := manager.New(manager.Config{Token: adminToken, GPUBridge: agentapi.GPUSide{Client: cl}, HostBridge: agentapi.HostSide{Client: cl},
		AllowInsecureAgents: true, ReconcileInterval: -1, DegradedAfter: 200 * time.Millisecond, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	msrv := httptest.NewServer(m.Handler())
	t.Cleanup(func() { msrv.Close(); m.Close() })
	r := &rig{t: t, ctx: ctx, mgr: m, mgrURL: msrv.URL, c: ctlclient.New(msrv.URL, adminToken)}

	timers := func(o Options) Options {
		o.Keepalive, o.DeadAfter, o.CompletionTimeout, o.Insecure, o.Log = 50*time.Millisecond, time.Second, 2*time.Second, true, quiet()
		o.Listen = netip.MustParseAddrPort("127.0.0.1:0")
		return o
	}
	start := func(o Options) (*Agent, string, context.CancelFunc) {
		actx, acancel := context.WithCancel(ctx)
		a, err := Start(actx, timers(o))
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(a.Handler())
		t.Cleanup(func() { acancel(); srv.Close(); a.Wait() })
		return a, srv.URL, acancel
	}
	endpoint := func(a *Agent, n int) pool.Endpoint {
		return pool.Endpoint{SwitchPort: fmt.Sprintf("p%d", n), MAC: fmt.Sprintf("02:00:00:00:00:%02x", n), IP: "127.0.0.1", UDPPort: a.DataPlane().Port()}
	}
	for i, n := range boxGPUs {
		b := pool.Box{ID: fmt.Sprintf("box%d", i)}
		for g := range n {
			b.GPUs = append(b.GPUs, pool.GPU{ID: fmt.Sprintf("box%d-g%d", i, g), Model: "H100", MemoryMiB: 80 << 10, BDF: fmt.Sprintf("0000:%02x:00.0", 0x18+g)})
		}
		a, url, stop := start(Options{Role: bridge.RoleGPU, Box: &b})
		b.Bridge, b.AgentURL = endpoint(a, 0x10+i), url
		_, cred, err := r.c.RegisterBoxAgent(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		a.SetCredential(cred)
		r.boxes, r.stop = append(r.boxes, a), append(r.stop, stop)
	}
	a, url, _ := start(Options{Role: bridge.RoleHost, Ports: 32, HostID: "h1", Manager: msrv.URL})
	_, cred, err := r.c.RegisterHostAgent(ctx, pool.Host{ID: "h1", Ports: 32, Bridge: endpoint(a, 1), AgentURL: url})
	if err != nil {
		t.Fatal(err)
	}
	a.SetCredential(cred)
	r.host = a
	return r
}

// present returns the host's slots holding an enumerated device.
func (r *rig) present() map[string]Slot {
	out := map[string]Slot{}
	for _, s := range r.host.Status().Slots {
		if s.Present {
			out[s.GPU] = s
		}
	}
	return out
}

// TestSagaDrivesAgents: the manager's saga, over the agent API, makes the
// lent GPUs appear on the emulated host (enumerated, vendor 10de, BOOT_0
// read through the bridges), release removes them and tears every pair
// down, and a GPU box that dies is reported by the host's agent: the host
// sees a surprise removal and the allocation is degraded, its GPU still
// lent and healthy (the host cannot tell a dead GPU from a silent link).
func TestSagaDrivesAgents(t *testing.T) {
	t.Parallel()
	r := newRig(t, 2, 1)
	a, err := r.c.Allocate(r.ctx, pool.Request{Host: "h1", Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	got := r.present()
	if len(got) != 3 {
		t.Fatalf("after alloc the host has %d GPUs enumerated: %+v", len(got), r.host.Status().Slots)
	}
	for _, as := range a.GPUs {
		s, ok := got[as.GPU]
		if !ok || s.Vendor != "0x10de" || s.Port != as.HostPort || s.Pair != as.Pair || s.Boot0 != fmt.Sprintf("%#08x", gpu.H100SXM.Boot0) {
			t.Errorf("gpu %s (pair %d, port %d): slot %+v", as.GPU, as.Pair, as.HostPort, s)
		}
		// Bytes through the pair: into the GPU's VRAM over BAR1 and back,
		// across a 4 KiB boundary; each GPU keeps its own.
		data := bytes.Repeat([]byte{byte(as.Pair), 0x5a, 0xa5}, 700)
		back, err := r.host.CopyCheck(r.ctx, as.Pair, 4096-100, data)
		if err != nil || !bytes.Equal(back, data) {
			t.Fatalf("copy check through pair %d: %v (read %d bytes back, equal %v)", as.Pair, err, len(back), bytes.Equal(back, data))
		}
	}
	if _, err := r.host.CopyCheck(r.ctx, 999, 0, []byte{1}); !errors.Is(err, ErrNoPair) {
		t.Fatalf("copy check through no pair: %v", err)
	}
	if _, err := r.c.Free(r.ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	st := r.host.Status()
	if len(st.Pairs) != 0 || len(r.present()) != 0 {
		t.Fatalf("after free the host runs pairs %+v, slots %+v", st.Pairs, st.Slots)
	}
	for _, s := range st.Slots {
		if s.Removed != RemovedHotRemove {
			t.Errorf("slot %+v: want an orderly removal", s)
		}
	}
	for i, b := range r.boxes {
		if ps, _ := b.ListPairs(r.ctx); len(ps) != 0 {
			t.Errorf("box%d still runs %+v", i, ps)
		}
	}

	a, err = r.c.Allocate(r.ctx, pool.Request{Host: "h1", Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	var dead pool.Assignment
	for _, as := range a.GPUs {
		if as.Box == "box1" {
			dead = as
		}
	}
	r.stop[1]() // box1's daemon dies
	waitfor.Until(t, "the allocation degraded", func() bool {
		got, err := r.c.Allocation(r.ctx, a.ID)
		return err == nil && got.State == pool.StateDegraded
	})
	if got, err := r.c.Allocation(r.ctx, a.ID); err != nil || len(got.GPUs) != 3 || len(got.Lost) != 0 ||
		got.Degraded == nil || !slices.Contains(got.Degraded.Pairs, dead.Pair) {
		t.Fatalf("allocation after box1 died: %+v (%+v), %v; want pair %d down and every GPU still lent", got, got.Degraded, err, dead.Pair)
	}
	if gs, err := r.c.GPUs(r.ctx, "", "unhealthy"); err != nil || len(gs) != 0 {
		t.Fatalf("unhealthy GPUs after box1 died: %+v, %v; want none (a silent link is no GPU failure)", gs, err)
	}
	var slot Slot
	for _, s := range r.host.Status().Slots {
		if s.Pair == dead.Pair {
			slot = s
		}
	}
	if slot.Present || slot.Removed != RemovedSurprise || !strings.Contains(slot.Reason, "link down") {
		t.Fatalf("the dead GPU's slot: %+v, want a surprise removal after link down", slot)
	}
	if got := r.present(); len(got) != 2 {
		t.Fatalf("the other GPUs must stay: %+v", got)
	}
}

// TestAgentRefusesWrongPairs: a pair for another box or GPU, a model that
// cannot be emulated, a taken GPU or host port, and hot-plug calls on a
// GPU box are refused with errors naming what is wrong; the agent API
// needs the credential.
func TestAgentRefusesWrongPairs(t *testing.T) {
	t.Parallel()
	r := newRig(t, 1)
	box := r.boxes[0]
	base := manager.Pair{ID: 7, Allocation: "a-1", Host: "h1", Box: "box0", GPU: "box0-g0", Model: "H100",
		HostBridge: pool.Endpoint{IP: "127.0.0.1", UDPPort: r.host.DataPlane().Port()},
		Key:        manager.PairKey{Generation: 5, Key: [32]byte{1, 2, 3}}}
	for _, tc := range []struct {
		name string
		edit func(p *manager.Pair)
		says string
	}{
		{"other box", func(p *manager.Pair) { p.Box = "box9" }, `box "box9"`},
		{"unknown gpu", func(p *manager.Pair) { p.GPU = "box0-g7" }, "box0-g7"},
		{"model", func(p *manager.Pair) { p.Model = "L40" }, "L40"},
		{"no key", func(p *manager.Pair) { p.Key = manager.PairKey{} }, "has no key"},
	} {
		p := base
		tc.edit(&p)
		if err := box.ProgramPair(r.ctx, p); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.says)
		}
	}
	if err := box.ProgramPair(r.ctx, base); err != nil {
		t.Fatal(err)
	}
	if err := box.ProgramPair(r.ctx, base); err != nil {
		t.Fatalf("programming the same pair again: %v", err)
	}
	// A new key changes the key of the running bridge, in two phases
	// (install, then switch), even on a link that is not up: the bridge,
	// and the GPU behind it, stay (KEY-12).
	box.mu.Lock()
	before := box.pairs[7].runner
	box.mu.Unlock()
	rekeyed := base
	rekeyed.Key = manager.PairKey{Generation: 6, Key: [32]byte{9}, Pending: true}
	if err := box.ProgramPair(r.ctx, rekeyed); err != nil {
		t.Fatalf("installing a new key for the pair: %v", err)
	}
	box.mu.Lock()
	after, key, pending := box.pairs[7].runner, box.pairs[7].p.Key, box.pairs[7].pending
	box.mu.Unlock()
	if after != before || key != base.Key || !pending.Same(rekeyed.Key) {
		t.Fatalf("after the install: same bridge %v, key %v, pending %v", after == before, key, pending)
	}
	rekeyed.Key.Pending = false
	if err := box.ProgramPair(r.ctx, rekeyed); err != nil {
		t.Fatalf("switching to the new key: %v", err)
	}
	box.mu.Lock()
	after, key = box.pairs[7].runner, box.pairs[7].p.Key
	box.mu.Unlock()
	if after != before || key != rekeyed.Key {
		t.Fatal("the pair did not take its new key on its bridge")
	}
	// A generation not above the one held is refused and changes nothing.
	stale := base
	stale.Key = manager.PairKey{Generation: 6, Key: [32]byte{7}}
	if err := box.ProgramPair(r.ctx, stale); err == nil || !strings.Contains(err.Error(), "not newer") {
		t.Fatalf("a stale key generation: %v", err)
	}
	box.mu.Lock()
	after, key = box.pairs[7].runner, box.pairs[7].p.Key
	box.mu.Unlock()
	if after != before || key != rekeyed.Key {
		t.Fatal("a refused key changed the pair")
	}
	// The status reports the generation the pair runs, which key that is
	// and the refusal (dxpu chaos compares both ends' and flags refusals).
	ps := box.Status().Pairs
	if len(ps) != 1 || ps[0].KeyGeneration != 6 || ps[0].KeyFingerprint != KeyFingerprint(rekeyed.Key) ||
		ps[0].KeyFingerprint == KeyFingerprint(stale.Key) || len(ps[0].KeyFingerprint) != 16 {
		t.Fatalf("status pairs %+v, want pair 7 at key generation 6 with the fingerprint of its key", ps)
	}
	if ps[0].KeysRefused != 1 || !strings.Contains(ps[0].LastKeyRefused, "key generation 6: ") ||
		!strings.Contains(ps[0].LastKeyRefused, "not newer than 6") {
		t.Fatalf("status after one refused key: keys_refused %d, last %q", ps[0].KeysRefused, ps[0].LastKeyRefused)
	}
	base = rekeyed
	other := base
	other.ID = 8
	if err := box.ProgramPair(r.ctx, other); err == nil || !strings.Contains(err.Error(), "serves pair 7") {
		t.Fatalf("a second pair on the same GPU: %v", err)
	}
	if err := box.HotAdd(r.ctx, base); err == nil || !strings.Contains(err.Error(), "host's agent") {
		t.Fatalf("hot-add on a GPU box: %v", err)
	}
	hp := base
	hp.HostPort = 32
	if err := r.host.ProgramPair(r.ctx, hp); err == nil || !strings.Contains(err.Error(), "ports 0..31") {
		t.Fatalf("a host port the host lacks: %v", err)
	}
	hp.HostPort, hp.Host = 0, "h2"
	if err := r.host.ProgramPair(r.ctx, hp); err == nil || !strings.Contains(err.Error(), `"h2"`) {
		t.Fatalf("a pair for another host: %v", err)
	}

	srv := httptest.NewServer(box.Handler())
	defer srv.Close()
	for _, tok := range []string{"", adminToken} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/agent/v1/status", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("status with token %q: %d, want 401", tok, resp.StatusCode)
		}
	}
	if err := box.RemovePair(r.ctx, base); err != nil {
		t.Fatal(err)
	}
	if ps, _ := box.ListPairs(r.ctx); len(ps) != 0 {
		t.Fatalf("after RemovePair: %+v", ps)
	}
}

// TestCopyCheckAPI: POST /agent/v1/pairs/{id}/copy-check on the host's
// agent answers the bytes read back through the pair, with the agent's
// credential only, and names what is wrong with a bad call.
func TestCopyCheckAPI(t *testing.T) {
	t.Parallel()
	r := newRig(t, 1)
	a, err := r.c.Allocate(r.ctx, pool.Request{Host: "h1", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r.host.Handler())
	defer srv.Close()
	post := func(pair uint32, tok, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/agent/v1/pairs/%d/copy-check", srv.URL, pair), strings.NewReader(body))
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	pair, cred := a.GPUs[0].Pair, r.host.credential()
	for _, tc := range []struct {
		pair      uint32
		tok, body string
		code      int
		says      string
	}{
		{pair, "", `{"offset":0,"data":"AQID"}`, http.StatusUnauthorized, "credential"},
		{pair, cred, `{"offset":0,"data":""}`, http.StatusBadRequest, "want 1..65536 bytes"},
		{pair, cred, `{"offset":0,"data":"!!"}`, http.StatusBadRequest, "body"},
		{999, cred, `{"offset":0,"data":"AQID"}`, http.StatusNotFound, "pair 999"},
		{pair, cred, `{"offset":8,"data":"AQIDBAUG"}`, http.StatusOK, `"data":"AQIDBAUG"`},
	} {
		code, body := post(tc.pair, tc.tok, tc.body)
		if code != tc.code || !strings.Contains(body, tc.says) {
			t.Errorf("pair %d body %s: %d %s, want %d naming %q", tc.pair, tc.body, code, body, tc.code, tc.says)
		}
	}
}
