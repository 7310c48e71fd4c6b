package bridgeagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/udp"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/secretfile"
	"github.com/dxpu/dxpu/internal/app/bridged"
	"github.com/dxpu/dxpu/tlp/encap"
)

// Sentinel errors of the agent's calls (the manager sees their text in a
// 502 agent_failed).
var (
	// ErrWrongBridge: a pair for another box, host or GPU than this agent's.
	ErrWrongBridge = errors.New("pair is not for this bridge")
	// ErrInUse: the pair's GPU or host port serves another pair.
	ErrInUse = errors.New("in use by another pair")
	// ErrNoPair: a hot-plug call for a pair that is not programmed.
	ErrNoPair = errors.New("pair not programmed")
	// ErrNoKey: a pair programmed without its key; agents run keyed pairs
	// only (the manager issues a key with every programming).
	ErrNoKey = errors.New("pair has no key: the manager sends one with every programming")
)

// Agent is the agent of one bridge daemon: it programs a bridge per pair on
// one data-plane socket and, on a host, drives the emulated host's
// hot-plug. Start one with Start; it stops when its context ends.
type Agent struct {
	o    Options
	log  *slog.Logger
	late *bridged.LateLog // the pairs' late timers: a stalled host stalls them all
	mux  *udp.Mux
	host hostSide // host role
	rep  *reporter
	cred atomic.Pointer[string]
	ctx  context.Context
	wg   sync.WaitGroup
	// lost gets the one error after which the agent cannot serve (a VM
	// host's guest gone): Run ends the daemon with it.
	lost chan error

	// apiCert is the agent API's --agent-cert pair (nil: http), re-read
	// on SIGHUP (ReloadCredentialOnHUP).
	apiCert atomic.Pointer[secretfile.KeyPair]

	mu    sync.Mutex
	pairs map[uint32]*pairRun
	// live is a.pairs as of its last change, for the metrics
	// (publishPairs); metricsAddr where Run serves them.
	live        atomic.Pointer[[]*pairRun]
	metricsAddr atomic.Pointer[net.Addr]
}

// pairRun is one programmed pair: its bridge on the wall clock and, on a
// GPU box, the device behind it.
type pairRun struct {
	p      manager.Pair
	runner *driver.Runner
	// metrics exports the runner's counters (labelled pair and role).
	metrics *driver.Collector
	// sizes is the bridge's configuration with its defaults, for the
	// sizes status reports.
	sizes  bridge.Config
	ctx    context.Context // ends when the pair is removed
	cancel context.CancelFunc
	done   chan struct{} // closed when its goroutines returned
	// Host role: the pair's place on the host, and a signal for every
	// link-up.
	slot   hostSlot
	linkUp chan struct{}
	// plugMu orders the host's removals and re-plugs after link events
	// with the manager's hot-plug calls. downRemoved: a link-down took the
	// GPU off the host, and the next link-up plugs it back (Agent.linkUp).
	plugMu      sync.Mutex
	downRemoved bool
	// pending is a key installed but not switched to (the first phase of
	// the manager's key change); p.Key is the one in use.
	pending manager.PairKey
	// keysRefused counts the keys the bridge refused for this pair (a
	// generation not newer than one it holds: the manager issued a
	// generation twice), keyRefusal is the last refusal; status reports
	// both, which dxpu chaos checks (issue 20, finding 2).
	keysRefused uint64
	keyRefusal  string
	// link: the link state as reported to the manager (report.go).
	link linkReports
}

// Start binds the data-plane socket, brings up the PCIe side and starts
// the agent; it runs until ctx ends (Wait returns then).
func Start(ctx context.Context, o Options) (*Agent, error) {
	if err := o.fill(); err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	a := &Agent{o: o, log: o.Log, late: bridged.NewLateLog(o.Log), ctx: ctx, lost: make(chan error, 1), pairs: map[uint32]*pairRun{}}
	a.cred.Store(&o.Credential)
	// The manager's URL is a flag to check before anything binds.
	var err error
	if a.rep, err = newReporter(o, a.credential, o.Log); err != nil {
		return nil, err
	}
	mux, err := udp.ListenMux(o.Listen)
	if err != nil {
		return nil, err
	}
	a.mux = mux
	switch {
	case o.Role == bridge.RoleHost && o.VM != nil:
		v, err := newVMHost(ctx, o)
		if err != nil {
			mux.Close()
			return nil, err
		}
		a.host = v
		// A guest whose tool exited or whose QEMU died takes no GPU
		// and answers for none lent to it: the agent must not go on
		// reporting itself and its pairs as serving.
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			if err := v.h.Lost(ctx); ctx.Err() == nil {
				a.lost <- fmt.Errorf("host guest: %w", err)
			}
		}()
	case o.Role == bridge.RoleHost:
		h := newEmuHost(o.slots(), o.CompletionTimeout, o.Log)
		a.host = h
		a.wg.Add(1)
		go func() { defer a.wg.Done(); h.loop(ctx) }()
		if err := h.start(ctx); err != nil {
			mux.Close()
			return nil, err
		}
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		if err := mux.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			a.log.Error("data plane stopped", "err", err)
		}
	}()
	if o.Role == bridge.RoleGPU && o.Manager == "" {
		a.log.Warn("no --manager: pair link state is not reported (an allocation whose host side falls silent never shows degraded)")
	}
	a.log.Info("bridge agent running", "role", o.Role, "data_plane", mux.LocalAddr(), "pairs_steered", mux.Steered(), "switch", o.Switch, "spin", o.Spin)
	return a, nil
}

// Lost delivers at most one error: the agent can no longer serve (a VM
// host's guest is gone). Its owner ends the agent (Run does, and exits).
func (a *Agent) Lost() <-chan error { return a.lost }

// Wait returns once the agent's context ended and every pair stopped.
func (a *Agent) Wait() {
	<-a.ctx.Done()
	a.mu.Lock()
	for id, pr := range a.pairs {
		pr.cancel()
		<-pr.done
		delete(a.pairs, id)
	}
	a.publishPairs()
	a.mu.Unlock()
	a.wg.Wait()
	if a.host != nil {
		a.host.close()
	}
}

// DataPlane is the bound UDP address.
func (a *Agent) DataPlane() netip.AddrPort { return a.mux.LocalAddr() }

// SetCredential replaces the agent credential (after a re-registration).
func (a *Agent) SetCredential(c string) { a.cred.Store(&c) }

func (a *Agent) credential() string { return *a.cred.Load() }

// check refuses a pair this agent does not serve.
func (a *Agent) check(p manager.Pair) error {
	if a.o.Role == bridge.RoleHost {
		if a.o.HostID != "" && p.Host != a.o.HostID {
			return fmt.Errorf("pair %d is for host %q, this agent serves %q: %w", p.ID, p.Host, a.o.HostID, ErrWrongBridge)
		}
		if p.HostPort < 0 || p.HostPort >= a.o.slots() {
			return fmt.Errorf("pair %d: host_port %d, this host has ports 0..%d: %w", p.ID, p.HostPort, a.o.slots()-1, ErrWrongBridge)
		}
		return nil
	}
	if b := a.o.Box; b != nil {
		if p.Box != b.ID {
			return fmt.Errorf("pair %d is for box %q, this agent serves %q: %w", p.ID, p.Box, b.ID, ErrWrongBridge)
		}
		ids := make([]string, len(b.GPUs))
		for i, g := range b.GPUs {
			ids[i] = g.ID
		}
		if !slices.Contains(ids, p.GPU) {
			return fmt.Errorf("pair %d: gpu %q is not in box %s (it lists %v): %w", p.ID, p.GPU, b.ID, ids, ErrWrongBridge)
		}
	}
	if a.o.PCIe == PCIeEmuGPU {
		if _, err := modelOf(p.Model); err != nil {
			return fmt.Errorf("pair %d gpu %s: %w", p.ID, p.GPU, err)
		}
	}
	return nil
}

// peerOf is where the pair's frames go: the switch, or the far end.
func (a *Agent) peerOf(p manager.Pair) (netip.AddrPort, error) {
	if a.o.Switch.IsValid() {
		return a.o.Switch, nil
	}
	far, side := p.GPUBridge, "gpu_bridge"
	if a.o.Role == bridge.RoleGPU {
		far, side = p.HostBridge, "host_bridge"
	}
	ip, err := netip.ParseAddr(far.IP)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("pair %d: %s.ip %q: frames need an address (or start the agent with --switch): %w", p.ID, side, far.IP, ErrWrongBridge)
	}
	port := far.UDPPort
	if port == 0 {
		port = encap.DefaultUDPPort
	}
	return netip.AddrPortFrom(ip, port), nil
}

// ProgramPair creates the pair's bridge (idempotent: the same pair again
// changes nothing; a pair ID with other contents replaces it).
func (a *Agent) ProgramPair(ctx context.Context, p manager.Pair) error {
	p.HostAgentCredential, p.GPUAgentCredential, p.HeldGeneration = "", "", 0
	if err := a.check(p); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if p.Key.IsZero() {
		return fmt.Errorf("pair %d: %w", p.ID, ErrNoKey)
	}
	if old, ok := a.pairs[p.ID]; ok {
		same, want := old.p, p
		same.Key, want.Key = manager.PairKey{}, manager.PairKey{}
		if same == want {
			// Only the key differs (ctl rekey, a restarted manager, a
			// restored peer): a key change on the running bridge, never
			// a new one, so the GPU stays where it is (KEY-12).
			return a.changeKey(old, p.Key)
		}
		// Anything else changed: a new bridge for the pair.
		a.log.Info("pair reprogrammed; replacing its bridge", "pair", p.ID)
		a.stop(ctx, old)
	}
	p.Key.Pending = false // a new bridge has this key only: it uses it
	for _, o := range a.pairs {
		if a.o.Role == bridge.RoleGPU && o.p.GPU == p.GPU {
			return fmt.Errorf("pair %d: gpu %s serves pair %d: %w", p.ID, p.GPU, o.p.ID, ErrInUse)
		}
		if a.o.Role == bridge.RoleHost && o.p.HostPort == p.HostPort {
			return fmt.Errorf("pair %d: host port %d serves pair %d: %w", p.ID, p.HostPort, o.p.ID, ErrInUse)
		}
	}
	peer, err := a.peerOf(p)
	if err != nil {
		return err
	}
	// Seed 0: the bridge draws its session nonces and ISN from crypto/rand,
	// so a restarted daemon never reopens the session its peer still holds.
	b, err := bridge.New(a.o.bridgeConfig(p.ID, p.Key.Key[:], p.Key.Generation))
	if err != nil {
		return fmt.Errorf("pair %d: %w", p.ID, err)
	}
	conn, err := a.mux.Open(p.ID, peer)
	if err != nil {
		return err
	}
	pr := &pairRun{p: p, runner: driver.New(b, conn), sizes: b.Config(), done: make(chan struct{}), linkUp: make(chan struct{}, 1)}
	pr.metrics = a.pairCollector(p.ID, pr.runner)
	pr.runner.OnEvent = func(e bridge.Event) { a.onEvent(pr, e) }
	pr.runner.OnLate = a.late.For("pair", p.ID)
	pr.runner.Spin = a.o.Spin
	var side func(context.Context) error
	if a.o.Role == bridge.RoleGPU {
		if side, err = a.device(pr); err != nil {
			conn.Close()
			return err
		}
	} else {
		if pr.slot, err = a.host.attach(p, pr.runner); err != nil {
			conn.Close()
			return fmt.Errorf("pair %d: %w", p.ID, err)
		}
		pr.runner.OnTLP = pr.slot.deliver
	}
	pctx, cancel := context.WithCancel(a.ctx)
	pr.ctx, pr.cancel = pctx, cancel
	var wg sync.WaitGroup
	for _, fn := range []func(context.Context) error{pr.runner.Run, side} {
		if fn == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(pctx); err != nil && !errors.Is(err, context.Canceled) {
				a.log.Error("pair stopped", "pair", p.ID, "err", err)
			}
		}()
	}
	go func() { wg.Wait(); close(pr.done) }()
	a.pairs[p.ID] = pr
	a.publishPairs()
	a.log.Info("pair programmed", "pair", p.ID, "allocation", p.Allocation, "host", p.Host, "host_port", p.HostPort,
		"box", p.Box, "gpu", p.GPU, "peer", peer)
	return nil
}

// changeKey applies one phase of the manager's key change (called with
// a.mu held): install k next to the key in use (k.Pending), or switch to
// it, installing it first if this end missed the first phase. Each call
// is idempotent. A key the bridge refuses (a generation not above the
// ones it holds) is an error for the manager and changes nothing: the
// pair keeps running under its key.
func (a *Agent) changeKey(pr *pairRun, k manager.PairKey) error {
	installOnly := k.Pending
	k.Pending = false
	if pr.p.Key.Same(k) {
		return nil // in use already (a late first phase, or a repeat)
	}
	if !pr.pending.Same(k) {
		if err := pr.runner.InstallKey(k.Generation, k.Key[:]); err != nil {
			a.log.Warn("pair key refused; the pair keeps its key", "pair", pr.p.ID, "key", k.String(), "err", err)
			pr.keysRefused++
			pr.keyRefusal = fmt.Sprintf("%v: %v", k, err)
			return fmt.Errorf("pair %d: installing %v: %w", pr.p.ID, k, err)
		}
		pr.pending = k
		a.log.Info("pair key installed", "pair", pr.p.ID, "key", k.String())
	}
	if installOnly {
		return nil
	}
	if err := pr.runner.ActivateKey(); err != nil {
		return fmt.Errorf("pair %d: switching to %v: %w", pr.p.ID, k, err)
	}
	pr.p.Key, pr.pending = k, manager.PairKey{}
	a.log.Info("pair key changed", "pair", pr.p.ID, "key", k.String())
	return nil
}

// stop ends a pair's bridge (called with a.mu held); on a host its device
// leaves the emulated host first.
func (a *Agent) stop(ctx context.Context, pr *pairRun) {
	if pr.slot != nil {
		pr.plugMu.Lock()
		pr.downRemoved = false
		if err := pr.slot.unplug(ctx, RemovedHotRemove, "pair removed"); err != nil {
			a.log.Warn("removing the device of a removed pair", "pair", pr.p.ID, "err", err)
		}
		pr.plugMu.Unlock()
	}
	pr.cancel()
	<-pr.done
	delete(a.pairs, pr.p.ID)
	a.publishPairs()
}

// RemovePair tears the pair's bridge down (idempotent).
func (a *Agent) RemovePair(ctx context.Context, p manager.Pair) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	pr, ok := a.pairs[p.ID]
	if !ok {
		return nil
	}
	a.stop(ctx, pr)
	a.log.Info("pair removed", "pair", p.ID, "gpu", pr.p.GPU)
	return nil
}

// ListPairs reports the pairs the agent runs, for reconciliation.
func (a *Agent) ListPairs(context.Context) ([]manager.Pair, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]manager.Pair, 0, len(a.pairs))
	for _, pr := range a.pairs {
		p := pr.p
		p.HeldGeneration = max(p.Key.Generation, pr.pending.Generation)
		out = append(out, p)
	}
	slices.SortFunc(out, func(x, y manager.Pair) int { return int(x.ID) - int(y.ID) })
	return out, nil
}

func (a *Agent) pair(p manager.Pair) (*pairRun, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	pr, ok := a.pairs[p.ID]
	if !ok {
		return nil, fmt.Errorf("pair %d: %w (program it first)", p.ID, ErrNoPair)
	}
	return pr, nil
}

// onEvent runs on the pair's runner with its lock held: it only logs and
// hands work to other goroutines.
func (a *Agent) onEvent(pr *pairRun, e bridge.Event) {
	if pr.slot != nil {
		pr.slot.event(e)
	}
	switch e.Kind {
	case bridge.EventLinkUp:
		a.log.Info("pair link up", "pair", pr.p.ID, "session", e.Session)
		select {
		case pr.linkUp <- struct{}{}:
		default:
		}
		seq := pr.link.seq.Add(1)
		if a.o.Role == bridge.RoleHost {
			a.wg.Add(1)
			go func() { defer a.wg.Done(); a.linkUp(pr, seq) }()
		} else {
			a.setLink(pr, seq, false, "")
		}
	case bridge.EventLinkDown:
		a.log.Warn("pair link down", "pair", pr.p.ID, "reason", e.Reason)
		seq := pr.link.seq.Add(1)
		if a.o.Role == bridge.RoleHost {
			a.wg.Add(1)
			go func() { defer a.wg.Done(); a.linkDown(pr, seq, e.Reason) }()
		} else {
			a.setLink(pr, seq, true, e.Reason)
		}
	default:
		// Per-TLP events (lost posted writes, completion timeouts) are
		// counted by the bridge; a line each would flood the log.
		a.log.Debug("bridge event", "pair", pr.p.ID, "event", e)
	}
}

// linkDown is the host's side of a dead pair: the device vanishes from the
// host (a surprise removal, as a real switch port reports a link down),
// then the manager is told the pair is down. The host cannot tell a dead
// GPU from a silent fabric or its own pause, so this says nothing of the
// GPU's health: the link back up plugs it in again (linkUp). seq is the
// event's place among the pair's link events: a link-up raised during the
// removal is reported after it (report.go). A link already up again by
// now keeps its GPU.
func (a *Agent) linkDown(pr *pairRun, seq uint64, reason string) {
	pr.plugMu.Lock()
	if pr.runner.State() != bridge.StateUp && a.present(pr) {
		if err := pr.slot.unplug(a.ctx, RemovedSurprise, "link down: "+reason); err != nil {
			a.log.Warn("surprise removal after link down", "pair", pr.p.ID, "err", err)
		} else {
			pr.downRemoved = true
		}
	}
	pr.plugMu.Unlock()
	a.setLink(pr, seq, true, reason)
}

// linkUp is the host's side of a pair's link back up: a GPU that a link
// down took away is plugged in again (hot-add through its slot, BOOT_0
// read through the fabric), then the manager is told the link is up. If
// the re-plug fails, the link-up is not reported (the manager keeps the
// pair down, the allocation degraded): the next link-up tries again.
func (a *Agent) linkUp(pr *pairRun, seq uint64) {
	pr.plugMu.Lock()
	if pr.downRemoved && pr.runner.State() == bridge.StateUp {
		if err := pr.slot.plug(pr.ctx); err != nil {
			pr.plugMu.Unlock()
			a.log.Warn("re-plugging the GPU after link up failed; the pair stays down for the manager", "pair", pr.p.ID, "gpu", pr.p.GPU, "err", err)
			return
		}
		pr.downRemoved = false
		a.log.Info("gpu back on the host after link up", "pair", pr.p.ID, "gpu", pr.p.GPU, "host_port", pr.p.HostPort)
	}
	pr.plugMu.Unlock()
	a.setLink(pr, seq, false, "")
}

// present says whether pair pr's GPU is on the host now.
func (a *Agent) present(pr *pairRun) bool {
	for _, s := range a.host.Slots() {
		if s.Port == pr.p.HostPort {
			return s.Pair == pr.p.ID && s.Present
		}
	}
	return false
}
