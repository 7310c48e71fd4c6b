package chaos

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/app/units"
)

// Options configure a campaign.
type Options struct {
	Dxpu     string        // the dxpu binary the daemons run
	Duration time.Duration // of the workload and the nemesis
	Seed     int64
	Bounds   Bounds
	// Dir holds the daemons' state and logs; empty: a temporary directory,
	// removed afterwards.
	Dir string
	// Net is the second octet of the loopback addresses 127.Net.0.x, so
	// that campaigns side by side do not collide; 0 picks one from the
	// process ID.
	Net int
	// NetNS runs each daemon in a network namespace of its own, joined by
	// veths to a bridge (root only; see nsNodes), instead of on loopback.
	NetNS bool
	// VMHost makes host2 a VM host: its agent boots a QEMU guest (--vm,
	// TCG) whose PCIe tree the saga hot-adds GPUs into. Its pairs are
	// held to VMBounds (a guest reboots when its agent restarts) and the
	// clients copy through host1's pairs only (a guest's agent has no copy
	// check; the guest's enumeration is still checked: vendor, BOOT_0).
	VMHost bool
	// VMBounds are host2's bounds with VMHost; zero: DefaultVMBounds.
	VMBounds Bounds
	// GuestTool is the static dxpu-guest for the VM host's guest; empty:
	// the agent's default (next to Dxpu, else on PATH).
	GuestTool string
	Log       *slog.Logger
}

// DefaultVMBounds are a VM host's: its guest, under TCG on a loaded
// machine, boots in tens of seconds after its agent restarts, and each
// hot-add waits for the guest to enumerate the GPU.
var DefaultVMBounds = Bounds{PairUp: 60 * time.Second, KeySplit: 60 * time.Second, Converge: 90 * time.Second}

// DefaultBounds are the checker's bounds for daemons started as Run starts
// them (--dead-after 1s, --degraded-after 2s, --reconcile-interval 2s).
var DefaultBounds = Bounds{PairUp: 6 * time.Second, KeySplit: 5 * time.Second, Converge: 15 * time.Second}

// The daemons' timers: short, so that a campaign of seconds sees faults
// detected and repaired.
const (
	degradedAfter     = 2 * time.Second
	reconcileInterval = 2 * time.Second
)

type campaign struct {
	o      Options
	start  time.Time
	dir    string
	url    string
	ctl    *ctlclient.Client
	procs  map[string]*proc
	order  []string
	cables map[string]*cable
	boxes  map[string]pool.Box
	hosts  map[string]pool.Host
	agents map[string]string // agent name -> its API URL
	fab    *nsFabric         // the namespace mode's; nil on loopback
	http   *http.Client      // the agents' and the switch's API calls

	mu      sync.Mutex
	hist    []Event
	creds   map[string]string
	lastObs *Obs
}

func (c *campaign) now() time.Duration { return time.Since(c.start) }

func (c *campaign) record(e Event) {
	c.mu.Lock()
	c.hist = append(c.hist, e)
	c.mu.Unlock()
}

func (c *campaign) op(name, subject string, err error) {
	e := Event{T: c.now(), Kind: EvOp, Name: name, Subject: subject}
	if err != nil {
		e.Err = err.Error()
	}
	c.record(e)
}

// vmHost is the host that is a VM host with Options.VMHost.
const vmHost = "host2"

// RunTargets is what the nemesis of Run hits: every daemon, the four
// agents' credentials, the two boxes' cables and the two hosts' agent
// APIs.
func RunTargets() Targets {
	return Targets{Daemons: []string{"manager", "switch", "box1", "box2", "host1", "host2"},
		Agents: []string{"box1", "box2", "host1", "host2"}, Boxes: []string{"box1", "box2"}, Hosts: []string{"host1", "host2"}}
}

// Run runs a campaign and checks its history.
func Run(ctx context.Context, o Options) (Report, error) {
	if o.Duration < 5*time.Second {
		return Report{}, units.Errorf("--duration %v: a campaign needs at least 5s (a warm-up of 3s, then faults)", o.Duration)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Bounds == (Bounds{}) {
		o.Bounds = DefaultBounds
	}
	if o.Net == 0 {
		o.Net = 100 + os.Getpid()%100
	}
	var perHost map[string]Bounds
	if o.VMHost {
		if o.VMBounds == (Bounds{}) {
			o.VMBounds = DefaultVMBounds
		}
		perHost = map[string]Bounds{vmHost: o.VMBounds}
	}
	c := &campaign{o: o, procs: map[string]*proc{}, cables: map[string]*cable{}, boxes: map[string]pool.Box{},
		hosts: map[string]pool.Host{}, agents: map[string]string{}, creds: map[string]string{}}
	c.dir = o.Dir
	if c.dir == "" {
		d, err := os.MkdirTemp("", "dxpu-chaos-")
		if err != nil {
			return Report{}, err
		}
		defer os.RemoveAll(d)
		c.dir = d
	} else if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return Report{}, err
	}
	tr := http.DefaultTransport.(*http.Transport)
	if o.NetNS {
		f, err := newNSFabric(o.Net)
		if err != nil {
			return Report{}, err
		}
		c.fab, tr = f, f.transport()
		// After the daemons are gone and the cables and connections
		// closed: nothing then holds a namespace.
		defer func() {
			for _, cb := range c.cables {
				cb.conn.Close()
			}
			tr.CloseIdleConnections()
			if err := f.close(); err != nil {
				o.Log.Warn("chaos: tearing the namespaces down", "err", err)
			}
		}()
	}
	c.http = &http.Client{Transport: tr}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer c.stopAll()
	sched := Schedule(o.Seed, o.Duration, RunTargets())
	if err := c.bringUp(ctx); err != nil {
		return Report{}, err
	}
	o.Log.Info("chaos: cluster up", "dir", c.dir, "faults", len(sched))
	c.start = time.Now()

	obsCtx, stopObs := context.WithCancel(ctx)
	defer stopObs()
	var obsWG sync.WaitGroup
	obsWG.Add(1)
	go func() { defer obsWG.Done(); c.observe(obsCtx) }()
	wlCtx, stopWL := context.WithCancel(ctx)
	var wlWG sync.WaitGroup
	for i, h := range []string{"host1", "host2"} {
		wlWG.Add(1)
		go func() { defer wlWG.Done(); c.client(wlCtx, h, o.Seed+int64(i)) }()
	}
	nemesisEnd := c.nemesis(ctx, sched)
	// The nemesis is over when its last fault is healed and the campaign's
	// time is up: the clients stop, then everything must converge.
	if d := o.Duration - c.now(); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	stopWL()
	wlWG.Wait()
	nemesisEnd = max(nemesisEnd, c.now())
	c.record(Event{T: nemesisEnd, Kind: EvHeal, Name: "nemesis_stopped"})
	converge := o.Bounds.Converge
	for _, hb := range perHost {
		converge = max(converge, hb.Converge)
	}
	deadline := time.Now().Add(converge + 2*time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		c.mu.Lock()
		last := c.lastObs
		var lastT time.Duration
		if n := len(c.hist); n > 0 {
			lastT = c.hist[n-1].T
		}
		c.mu.Unlock()
		if last != nil && lastT > nemesisEnd {
			if ok, _ := last.converged(); ok {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopObs()
	obsWG.Wait()
	if err := ctx.Err(); err != nil {
		return Report{}, err
	}
	c.mu.Lock()
	hist := append([]Event(nil), c.hist...)
	c.mu.Unlock()
	slices.SortStableFunc(hist, func(x, y Event) int { return cmp.Compare(x.T, y.T) })
	res := CheckHosts(hist, nemesisEnd, o.Bounds, perHost)
	rep := Summarize(hist, sched, res)
	rep.Seed, rep.Duration, rep.Bounds, rep.HostBounds, rep.History = o.Seed, o.Duration, o.Bounds, perHost, hist
	return rep, nil
}

// ip is a node's address: on loopback 127.N.0.host, in the namespace
// mode 10.N.0.host on its eth0.
func (c *campaign) ip(host int) string {
	if c.fab != nil {
		return fmt.Sprintf("10.%d.0.%d", c.o.Net, host)
	}
	return fmt.Sprintf("127.%d.0.%d", c.o.Net, host)
}

// inCampaign runs fn where the campaign's sockets belong: its namespace,
// or here on loopback.
func (c *campaign) inCampaign(fn func() error) error {
	if c.fab != nil {
		return c.fab.do(fn)
	}
	return fn()
}

func randomSecret() string {
	var b [32]byte
	crand.Read(b[:])
	return base64.StdEncoding.EncodeToString(b[:])
}

func (c *campaign) addProc(name string, args ...string) *proc {
	p := &proc{name: name, bin: c.o.Dxpu, args: args, log: filepath.Join(c.dir, name+".log")}
	if c.fab != nil {
		p.ns = c.fab.nodes[name]
	}
	c.procs[name] = p
	c.order = append(c.order, name)
	return p
}

// bringUp starts the cluster as examples/README.md does, on loopback.
func (c *campaign) bringUp(ctx context.Context) error {
	readTok := filepath.Join(c.dir, "read.tok")
	adminTok := filepath.Join(c.dir, "admin.tok")
	if err := os.WriteFile(readTok, []byte(randomSecret()+"\n"), 0o600); err != nil {
		return err
	}
	mgr := c.ip(1) + ":7700"
	c.url = "http://" + mgr
	m := c.addProc("manager", "manager", "--listen", mgr, "--store", filepath.Join(c.dir, "manager.db"),
		"--token-file", adminTok, "--init-token", "--read-token-file", readTok, "--allow-insecure-agents",
		"--degraded-after", degradedAfter.String(), "--reconcile-interval", reconcileInterval.String())
	if err := m.start(); err != nil {
		return err
	}
	if err := c.until(ctx, "the manager answers /healthz", func() bool {
		tok, err := os.ReadFile(adminTok)
		if err != nil {
			return false
		}
		c.ctl = ctlclient.New(c.url, strings.TrimSpace(string(tok)))
		c.ctl.HTTP = &http.Client{Timeout: 20 * time.Second, Transport: c.http.Transport}
		_, err = c.ctl.Healthz(ctx)
		return err == nil
	}); err != nil {
		return err
	}
	sw := c.ip(2) + ":8855"
	if err := c.addProc("switch", "switch", "--mode", "udp", "--udp-listen", sw, "--manager", c.url,
		"--token-file", readTok, "--metrics", c.ip(2)+":9855").start(); err != nil {
		return err
	}
	for i := 1; i <= 2; i++ {
		id := fmt.Sprintf("box%d", i)
		agent, data, cab := c.ip(20+i), c.ip(20+i)+":8855", c.ip(40+i)+":8855"
		b := pool.Box{ID: id, AgentURL: "http://" + agent + ":7701", Location: pool.Location{Pod: "pod1", Rack: "r2"},
			Bridge: pool.Endpoint{SwitchPort: "udp", MAC: fmt.Sprintf("02:00:00:00:01:%02x", i), IP: c.ip(40 + i), UDPPort: 8855}}
		for g := range 2 {
			b.GPUs = append(b.GPUs, pool.GPU{ID: fmt.Sprintf("%s-gpu%d", id, g), Model: "H100", MemoryMiB: 81920,
				BDF: fmt.Sprintf("0000:%02x:00.0", 3+g), Switch: 0, Port: g})
		}
		_, cred, err := c.ctl.RegisterBoxAgent(ctx, b)
		if err != nil {
			return fmt.Errorf("register %s: %w", id, err)
		}
		c.boxes[id], c.agents[id] = b, b.AgentURL
		if err := c.writeCred(id, cred); err != nil {
			return err
		}
		var cb *cable
		if err := c.inCampaign(func() (err error) { cb, err = newCable(cab, data, sw); return err }); err != nil {
			return err
		}
		c.cables[id] = cb
		go cb.run(ctx)
		if err := c.addProc(id, "bridge", "agent", "--role", "gpu", "--agent-listen", agent+":7701", "--insecure",
			"--agent-credential-file", filepath.Join(c.dir, id+".cred"), "--listen", data, "--switch", cab,
			// As examples/README.md: a box reports its pairs' link-down, the
			// only report when the host's agent is the one that died.
			"--manager", c.url).start(); err != nil {
			return err
		}
	}
	for i := 1; i <= 2; i++ {
		id := fmt.Sprintf("host%d", i)
		agent := c.ip(10 + i)
		h := pool.Host{ID: id, AgentURL: "http://" + agent + ":7701", Location: pool.Location{Pod: "pod1", Rack: "r1"}, Ports: pool.MinHostPorts,
			Bridge: pool.Endpoint{SwitchPort: "udp", MAC: fmt.Sprintf("02:00:00:00:02:%02x", i), IP: agent, UDPPort: 8855}}
		_, cred, err := c.ctl.RegisterHostAgent(ctx, h)
		if err != nil {
			return fmt.Errorf("register %s: %w", id, err)
		}
		c.hosts[id], c.agents[id] = h, h.AgentURL
		if err := c.writeCred(id, cred); err != nil {
			return err
		}
		args := []string{"bridge", "agent", "--role", "host", "--host-id", id, "--agent-listen", agent + ":7701", "--insecure",
			"--agent-credential-file", filepath.Join(c.dir, id+".cred"), "--listen", agent + ":8855", "--switch", sw,
			"--manager", c.url}
		if c.o.VMHost && id == vmHost {
			// A small guest: TCG on two cores boots one in seconds.
			args = append(args, "--vm", "--accel", "tcg", "--memory-mb", "256", "--dir", filepath.Join(c.dir, id+"-vm"))
			if c.o.GuestTool != "" {
				args = append(args, "--guest-tool", c.o.GuestTool)
			}
		}
		if err := c.addProc(id, args...).start(); err != nil {
			return err
		}
	}
	return c.until(ctx, "every agent and the switch answer", func() bool {
		o := c.snapshot(ctx)
		return o.SwitchUp && len(o.Agents) == len(c.agents)
	})
}

func (c *campaign) writeCred(id, cred string) error {
	c.mu.Lock()
	c.creds[id] = cred
	c.mu.Unlock()
	f := filepath.Join(c.dir, id+".cred")
	tmp := f + ".tmp"
	if err := os.WriteFile(tmp, []byte(cred+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, f)
}

// until polls cond for up to 30s (daemons starting; 120s with a VM host,
// whose agent answers once its guest booted); the error names what never
// happened and where the logs are.
func (c *campaign) until(ctx context.Context, what string, cond func() bool) error {
	limit := 30 * time.Second
	if c.o.VMHost {
		limit = 120 * time.Second
	}
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return units.Errorf("bringing the cluster up: %s: not after %v (logs in %s)", what, limit, c.dir)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

func (c *campaign) stopAll() {
	for _, n := range c.order {
		p := c.procs[n]
		_ = p.signal(syscall.SIGCONT)
		_ = p.signal(syscall.SIGTERM)
	}
	for _, n := range c.order {
		if p := c.procs[n]; !p.wait(3 * time.Second) {
			p.kill()
		}
	}
}

// client is one host's user: it allocates, frees and rekeys, and (as an
// operator would) marks GPUs the manager took out healthy again, so that
// the pool does not run dry.
func (c *campaign) client(ctx context.Context, host string, seed int64) {
	r := rand.New(rand.NewPCG(uint64(seed), 0x636c69656e74))
	var mine []string
	n := 0
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(200+r.IntN(400)) * time.Millisecond):
		}
		c.mu.Lock()
		last := c.lastObs
		c.mu.Unlock()
		if last != nil && last.ManagerUp {
			// Forget allocations the manager released on its own (every
			// GPU lost).
			mine = slices.DeleteFunc(mine, func(id string) bool {
				return !slices.ContainsFunc(last.Allocations, func(a AllocObs) bool { return a.ID == id })
			})
		}
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		if last != nil && last.ManagerUp {
			// An allocation whose every GPU was lost stays active with
			// none: its user gives it back and asks again.
			for _, a := range last.Allocations {
				if len(a.GPUs) == 0 && a.State == "active" && slices.Contains(mine, a.ID) {
					_, err := c.ctl.Free(cctx, a.ID)
					if err == nil || ctlclient.IsCode(err, "not_found") {
						mine = slices.DeleteFunc(mine, func(id string) bool { return id == a.ID })
					}
					c.op("free", a.ID+" (every GPU lost)", err)
				}
			}
		}
		// Allocations live long and rekeys are few (a rekey repairs a
		// split key), so that faults hit pairs in use and their damage
		// shows.
		switch x := r.IntN(40); {
		case x < 16 && len(mine) < 2:
			n++
			a, err := c.ctl.Allocate(cctx, pool.Request{Host: host, Count: 1, RequestID: fmt.Sprintf("%s-%d-%d", host, seed, n)})
			if err == nil {
				mine = append(mine, a.ID)
			}
			c.op("alloc", a.ID+" for "+host, err)
		case x >= 16 && x < 17 && len(mine) > 0:
			id := mine[0]
			_, err := c.ctl.Free(cctx, id)
			if err == nil || ctlclient.IsCode(err, "not_found") {
				mine = mine[1:]
			}
			c.op("free", id, err)
		case x >= 17 && x < 19 && len(mine) > 0:
			id := mine[r.IntN(len(mine))]
			_, err := c.ctl.Rekey(cctx, id)
			c.op("rekey", id, err)
		}
		if last != nil && last.ManagerUp && !(c.o.VMHost && host == vmHost) {
			for _, a := range last.Allocations {
				if slices.Contains(mine, a.ID) && a.State == "active" && len(a.GPUs) > 0 {
					g := a.GPUs[r.IntN(len(a.GPUs))]
					c.copyCheck(cctx, r, a, g.Pair)
				}
			}
		}
		if last != nil {
			for _, g := range last.Unhealthy {
				if strings.HasPrefix(g, host2box(host)) {
					_, err := c.ctl.SetGPUHealth(cctx, g, pool.Healthy)
					c.op("repair_gpu", g, err)
				}
			}
		}
		cancel()
	}
	// Leave the allocations: the convergence check wants them up.
}

// copyCheck moves random bytes through pair into its GPU's VRAM and back
// (the host agent's copy check) and records the op: failed if the call
// failed, corrupt if other bytes came back.
func (c *campaign) copyCheck(ctx context.Context, r *rand.Rand, a AllocObs, pair uint32) {
	data := make([]byte, 1024)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	off := uint64(pair%64) << 16 // each pair's own place in VRAM
	body, _ := json.Marshal(map[string]any{"offset": off, "data": data})
	ctx, cancel := context.WithTimeout(ctx, 6*time.Second)
	defer cancel()
	c.mu.Lock()
	cred := c.creds[a.Host]
	c.mu.Unlock()
	subject := fmt.Sprintf("%s pair %d", a.ID, pair)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/agent/v1/pairs/%d/copy-check", c.agents[a.Host], pair), bytes.NewReader(body))
	if err != nil {
		c.op("copy", subject, err)
		return
	}
	req.Header.Set("Authorization", "Bearer "+cred)
	resp, err := c.http.Do(req)
	if err != nil {
		c.op("copy", subject, err)
		return
	}
	defer resp.Body.Close()
	var out struct {
		Data  []byte `json:"data"`
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		c.op("copy", subject, fmt.Errorf("%s: %w", resp.Status, err))
		return
	}
	if resp.StatusCode != http.StatusOK {
		c.op("copy", subject, fmt.Errorf("%s: %s", resp.Status, out.Error.Message))
		return
	}
	if !bytes.Equal(out.Data, data) {
		c.op("copy", subject, fmt.Errorf("%s wrote %d bytes sha256 %x, read back %d bytes sha256 %x",
			corruptPrefix, len(data), sha256.Sum256(data), len(out.Data), sha256.Sum256(out.Data)))
		return
	}
	c.op("copy", subject, nil)
}

// host2box splits the repairs between the clients: host1's repairs
// box1's GPUs, host2's box2's.
func host2box(host string) string { return "box" + strings.TrimPrefix(host, "host") }

// observe snapshots the system every 200ms into the history.
func (c *campaign) observe(ctx context.Context) {
	for ctx.Err() == nil {
		t := c.now()
		o := c.snapshot(ctx)
		if ctx.Err() != nil {
			return
		}
		c.mu.Lock()
		c.hist = append(c.hist, Event{T: t, Kind: EvObs, Obs: o})
		c.lastObs = o
		c.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// snapshot asks every daemon at once, each with a short timeout (a
// stopped daemon does not answer).
func (c *campaign) snapshot(ctx context.Context) *Obs {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	o := &Obs{Agents: map[string][]PairObs{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		allocs, err := c.ctl.Allocations(ctx, "")
		if err != nil {
			return
		}
		gpus, err := c.ctl.GPUs(ctx, "", "unhealthy")
		if err != nil {
			return
		}
		t, err := c.ctl.Table(ctx)
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		o.ManagerUp, o.TableVersion = true, t.Version
		for _, g := range gpus {
			o.Unhealthy = append(o.Unhealthy, g.ID)
		}
		for _, a := range allocs {
			ao := AllocObs{ID: a.ID, Host: a.Host, State: string(a.State), Lost: a.Lost}
			if a.Degraded != nil {
				ao.Degraded = a.Degraded.Reason
			}
			for _, g := range a.GPUs {
				ao.GPUs = append(ao.GPUs, Assign{Pair: g.Pair, GPU: g.GPU, Box: g.Box})
			}
			o.Allocations = append(o.Allocations, ao)
		}
	}()
	go func() {
		defer wg.Done()
		v, err := switchTableVersion(ctx, c.http, "http://"+c.ip(2)+":9855/metrics")
		mu.Lock()
		o.SwitchUp, o.SwitchTable = err == nil, v
		mu.Unlock()
	}()
	c.mu.Lock()
	creds := make(map[string]string, len(c.creds))
	for k, v := range c.creds {
		creds[k] = v
	}
	c.mu.Unlock()
	for name, u := range c.agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ps, err := agentStatus(ctx, c.http, u, creds[name])
			if err == nil {
				mu.Lock()
				o.Agents[name] = ps
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return o
}

func get(ctx context.Context, hc *http.Client, url, cred string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if cred != "" {
		req.Header.Set("Authorization", "Bearer "+cred)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return resp, nil
}

func switchTableVersion(ctx context.Context, hc *http.Client, url string) (uint64, error) {
	resp, err := get(ctx, hc, url, "")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "dxpu_switch_table_version "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return uint64(f), err
		}
	}
	return 0, errors.New("no dxpu_switch_table_version in the switch's metrics")
}

func agentStatus(ctx context.Context, hc *http.Client, base, cred string) ([]PairObs, error) {
	resp, err := get(ctx, hc, base+"/agent/v1/status", cred)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var st struct {
		Pairs []struct {
			ID         uint32 `json:"id"`
			Allocation string `json:"allocation"`
			Link       string `json:"link"`
			Gen        uint32 `json:"key_generation"`
			KeyFP      string `json:"key_fingerprint"`
			Refused    uint64 `json:"keys_refused"`
			Refusal    string `json:"last_key_refused"`
		} `json:"pairs"`
		Slots []struct {
			Pair    uint32 `json:"pair"`
			Present bool   `json:"present"`
			Vendor  string `json:"vendor"`
			Boot0   string `json:"boot0"`
			Removed string `json:"removed"`
			Reason  string `json:"reason"`
		} `json:"slots"`
	}
	if err := jsonDecode(resp.Body, &st); err != nil {
		return nil, err
	}
	out := make([]PairObs, 0, len(st.Pairs))
	for _, p := range st.Pairs {
		po := PairObs{ID: p.ID, Allocation: p.Allocation, Link: p.Link, Gen: p.Gen, KeyFP: p.KeyFP, KeysRefused: p.Refused, KeyRefusal: p.Refusal}
		for _, s := range st.Slots {
			switch {
			case s.Pair == p.ID && s.Present:
				po.Present, po.Vendor, po.Boot0, po.Removed = true, s.Vendor, s.Boot0, ""
			case s.Pair == p.ID && s.Removed != "" && !po.Present:
				po.Removed = s.Removed + " (" + s.Reason + ")"
			}
		}
		out = append(out, po)
	}
	return out, nil
}
