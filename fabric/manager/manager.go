package manager

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/fabric/store"
)

// Config configures a Manager. Every field is optional.
type Config struct {
	// Store persists the pool; nil means an in-memory store. A store that
	// implements store.Elector (etcd) makes the manager campaign for
	// leadership and stand by until it leads.
	Store store.Store
	// Agents. Nil ones do nothing (Noop).
	GPUBridge  GPUBridgeProgrammer
	Switch     SwitchProgrammer
	HostBridge HostBridgeProgrammer
	// Token is the admin bearer token: it allows every API call. It never
	// leaves the manager (agents get their own credentials). Empty turns
	// authentication off (in-process demo only).
	Token string
	// ReadToken allows GET calls only (inventory, allocations, the table
	// and event watches): for switches, dashboards and hosts that watch.
	// Empty: reads need the admin token.
	ReadToken string
	// ID names this manager in the election; its advertised URL is best.
	ID string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// StepTimeout bounds one agent call (default 10s).
	StepTimeout time.Duration
	// ReconcileInterval is how often the leader retries unfinished
	// releases and compares agents' actual pairs with the desired ones
	// (default 30s; negative disables).
	ReconcileInterval time.Duration
	// Registry receives the manager's metrics; nil means a new one.
	Registry *prometheus.Registry
	// AllowInsecureAgents lets bridges register agent URLs over plain
	// http (a lab without certificates): their credentials then cross
	// the network in clear. Off, an http agent_url is 400.
	AllowInsecureAgents bool
	// DegradedAfter is how long a pair's link may stay down, as its box's
	// agent reports, before its allocation is degraded (default
	// DefaultDegradedAfter).
	DegradedAfter time.Duration
	// UnreachableAfter is how long a box's agent may fail to answer the
	// reconciler before the box is reported unreachable (reachability.go;
	// default DefaultUnreachableAfter). Checked at each reconciliation.
	UnreachableAfter time.Duration
}

// Manager is dxpu's control plane: it owns the pool, runs the hot-plug saga
// for every allocation and serves the HTTP API. Create it with New, serve
// Handler, stop it with Close.
type Manager struct {
	cfg     Config
	log     *slog.Logger
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	metrics *metrics
	table   *tableState
	events  *eventLog
	links   *linkState  // pairs the box agents report down
	reach   *reachState // box agents that do not answer
	creds   credentials // agents' credentials, loaded with the pool
	keys    *keyBook    // pair keys (in memory) and their generations (in the store)
	handler http.Handler

	mu      sync.RWMutex // guards pool and leading
	pool    *pool.Pool
	leading bool

	inv sync.Mutex // serializes inventory writes (pool then store)

	busyMu sync.Mutex
	busy   map[string]string // allocations inside a saga: what holds each (claim*)
}

// New creates a manager. With a plain store it loads the pool and
// reconciles agents before returning, so its Handler is ready; with an
// Elector store it returns a standby that takes the lead in the background.
func New(cfg Config) (*Manager, error) {
	if err := checkTokens(cfg); err != nil {
		return nil, err
	}
	if cfg.Store == nil {
		cfg.Store = store.NewMemory()
	}
	if cfg.GPUBridge == nil {
		cfg.GPUBridge = Noop{}
	}
	if cfg.HostBridge == nil {
		cfg.HostBridge = Noop{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.StepTimeout <= 0 {
		cfg.StepTimeout = 10 * time.Second
	}
	if cfg.ReconcileInterval == 0 {
		cfg.ReconcileInterval = 30 * time.Second
	}
	if cfg.DegradedAfter <= 0 {
		cfg.DegradedAfter = DefaultDegradedAfter
	}
	if cfg.UnreachableAfter <= 0 {
		cfg.UnreachableAfter = DefaultUnreachableAfter
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.ID == "" {
		cfg.ID = "manager-" + randomID(4)
	}
	m := &Manager{cfg: cfg, log: cfg.Logger, table: newTableState(), events: newEventLog(), links: newLinkState(), reach: newReachState(), busy: map[string]string{},
		creds: credentials{by: map[bridgeID]agentCred{}}}
	m.keys = newKeyBook()
	var err error
	m.ctx, m.cancel = context.WithCancel(context.Background())
	if m.metrics, err = newMetrics(cfg.Registry, m); err != nil {
		return nil, err
	}
	m.handler = m.routes()
	if el, ok := cfg.Store.(store.Elector); ok {
		m.wg.Add(1)
		go m.campaignLoop(el)
		return m, nil
	}
	if err := m.lead(m.ctx); err != nil {
		m.cancel()
		return nil, err
	}
	m.startBackground(m.ctx)
	return m, nil
}

// Handler is the HTTP API (/v1/..., /metrics, /healthz).
func (m *Manager) Handler() http.Handler { return m.handler }

// Leading reports whether this manager is the leader.
func (m *Manager) Leading() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.leading
}

// Pool returns the live pool (nil on a standby). Callers may read it; every
// change must go through the manager so that it is persisted.
func (m *Manager) Pool() *pool.Pool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.pool
}

// Close stops background work and, with an Elector store, resigns so that
// a standby takes over at once. It does not close the store.
func (m *Manager) Close() error {
	m.cancel()
	m.wg.Wait()
	if el, ok := m.cfg.Store.(store.Elector); ok {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return el.Resign(ctx)
	}
	return nil
}

func (m *Manager) campaignLoop(el store.Elector) {
	defer m.wg.Done()
	for m.ctx.Err() == nil {
		lost, err := el.Campaign(m.ctx, m.cfg.ID)
		if err != nil {
			if m.ctx.Err() == nil {
				m.log.Warn("campaign failed; retrying", "err", err)
				sleep(m.ctx, time.Second)
			}
			continue
		}
		m.log.Info("elected leader", "id", m.cfg.ID)
		termCtx, endTerm := context.WithCancel(m.ctx)
		if err := m.lead(termCtx); err != nil {
			m.log.Error("taking the lead failed; resigning", "err", err)
			endTerm()
			m.resign(el)
			sleep(m.ctx, time.Second)
			continue
		}
		var bg sync.WaitGroup
		bg.Add(1)
		go func() { defer bg.Done(); m.background(termCtx) }()
		select {
		case <-lost:
			m.log.Warn("lost leadership", "id", m.cfg.ID)
		case <-m.ctx.Done():
		}
		endTerm()
		bg.Wait()
		m.stepDown()
	}
}

func (m *Manager) resign(el store.Elector) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	el.Resign(ctx)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// lead loads the pool from the store, reconciles the agents and starts
// serving as leader.
func (m *Manager) lead(ctx context.Context) error {
	p, err := m.load(ctx)
	if err != nil {
		return err
	}
	m.loadTable(p) // before leading: the API serves the whole table at once
	m.keys.reset() // another leader may have issued keys meanwhile
	m.mu.Lock()
	m.pool, m.leading = p, true
	m.mu.Unlock()
	m.restoreLinks(ctx, p) // after leading: degrade reads the live pool
	m.metrics.leader.Set(1)
	m.reconcile(ctx, true)
	return nil
}

func (m *Manager) stepDown() {
	m.mu.Lock()
	m.pool, m.leading = nil, false
	m.mu.Unlock()
	m.metrics.leader.Set(0)
	m.table.reset()
}

func (m *Manager) startBackground(ctx context.Context) {
	m.wg.Add(1)
	go func() { defer m.wg.Done(); m.background(ctx) }()
}

func (m *Manager) background(ctx context.Context) {
	if m.cfg.ReconcileInterval < 0 {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(m.cfg.ReconcileInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.reconcile(ctx, false)
		}
	}
}

// load reads the store into a fresh pool.
func (m *Manager) load(ctx context.Context) (*pool.Pool, error) {
	p := pool.New()
	creds := map[bridgeID]agentCred{}
	read := func(prefix string, each func(kv store.KV) error) error {
		kvs, err := m.cfg.Store.List(ctx, prefix)
		if err != nil {
			return fmt.Errorf("manager: load %s: %w", prefix, err)
		}
		for _, kv := range kvs {
			if err := each(kv); err != nil {
				// One bad record must not keep the pool down; say
				// which and go on.
				m.log.Error("skipping stored record", "key", kv.Key, "err", err)
				m.metrics.loadErrors.Inc()
			}
		}
		return nil
	}
	steps := []struct {
		prefix string
		each   func(kv store.KV) error
	}{
		{keyBox, func(kv store.KV) error {
			var b pool.Box
			if err := json.Unmarshal(kv.Value, &b); err != nil {
				return err
			}
			_, err := p.AddBox(b)
			return err
		}},
		{keyHost, func(kv store.KV) error {
			var h pool.Host
			if err := json.Unmarshal(kv.Value, &h); err != nil {
				return err
			}
			_, err := p.AddHost(h)
			return err
		}},
		{keyRTT, func(kv store.KV) error {
			var r pool.RTT
			if err := json.Unmarshal(kv.Value, &r); err != nil {
				return err
			}
			if err := p.SetRTT(r); err != nil && !errors.Is(err, pool.ErrNotFound) {
				return err // an RTT left by a removed box or host is dropped quietly
			}
			return nil
		}},
		{keyAlloc, func(kv store.KV) error {
			var a pool.Allocation
			if err := json.Unmarshal(kv.Value, &a); err != nil {
				return err
			}
			return p.Restore(a)
		}},
		{keyCred, func(kv store.KV) error {
			who, ok := bridgeOfKey(kv.Key)
			if !ok {
				return fmt.Errorf("agent credential key %q: want cred/box/<id> or cred/host/<id>", kv.Key)
			}
			ac, err := decodeCred(kv)
			if err == nil {
				creds[who] = ac
			}
			return err
		}},
	}
	for _, s := range steps {
		if err := read(s.prefix, s.each); err != nil {
			return nil, err
		}
	}
	if err := p.CheckInvariants(); err != nil {
		return nil, fmt.Errorf("manager: loaded pool inconsistent: %w", err)
	}
	m.creds.replace(creds)
	return p, nil
}

// Store keys (see package store).
const (
	keyBox   = "box/"
	keyHost  = "host/"
	keyRTT   = "rtt/"
	keyAlloc = "alloc/"
	keyCred  = "cred/" // cred/box/<id>, cred/host/<id>: agent credentials
	// keygen/<pair id>: the last key generation issued for the pair
	// ({"generation":N}); never the key.
	keyKeyGen = "keygen/"
)

func boxKey(id string) string            { return keyBox + id }
func hostKey(id string) string           { return keyHost + id }
func rttKey(host, box string) string     { return keyRTT + host + "/" + box }
func allocKey(id string) string          { return keyAlloc + id }
func mustJSON(v any) []byte              { b, _ := json.Marshal(v); return b }
func putJSON(key string, v any) store.Op { return store.Put(key, mustJSON(v)) }

// storedBox strips the per-read allocation fields (on a copy: b's GPUs
// are the caller's).
func storedBox(b pool.Box) pool.Box {
	b.GPUs = slices.Clone(b.GPUs)
	b.Unreachable = nil
	for i := range b.GPUs {
		b.GPUs[i].Allocation = ""
		b.GPUs[i].Unreachable = nil
	}
	return b
}

func storedHost(h pool.Host) pool.Host {
	h.UsedPorts = 0
	return h
}

func randomID(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// errNotLeader is returned by operations on a standby.
var errNotLeader = errors.New("this manager is not the leader")

func (m *Manager) livePool() (*pool.Pool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if !m.leading {
		return nil, errNotLeader
	}
	return m.pool, nil
}

// leaderHint names the leader for a standby's error message.
func (m *Manager) leaderHint(ctx context.Context) string {
	el, ok := m.cfg.Store.(store.Elector)
	if !ok {
		return ""
	}
	id, err := el.Leader(ctx)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(id)
}
