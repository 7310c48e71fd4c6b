package bridgeagent_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/app/bridgeagent"
	"github.com/dxpu/dxpu/internal/testbin"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// The key lifecycle (KEY-8..KEY-12 in docs/protocol.md) on real processes:
// a dxpu manager and two dxpu bridge agents (a box with one GPU, a host) on
// loopback, plain http, no switch (each agent sends to the other's
// registered address). No privilege needed.

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Remove()
	os.Exit(code)
}

// freePort returns a loopback port nothing listens on now (network "tcp"
// or "udp").
func freePort(t *testing.T, network string) int {
	t.Helper()
	if network == "udp" {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).Port
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// loLab is one manager, one GPU box agent and one host agent on loopback.
type loLab struct {
	t          *testing.T
	bin, dir   string
	mgrURL     string
	mgrArgs    []string
	hostArgs   []string
	mgr        *proc
	gpu, host  *proc
	hostAPI    string // the host agent's own API URL
	hostCred   string
	hostFailed atomic.Bool // the proxy in front of the host agent's API fails every call
}

func (l *loLab) path(name string) string { return filepath.Join(l.dir, name) }

func (l *loLab) run(name string, args ...string) *proc {
	l.t.Helper()
	cmd := exec.Command(l.bin, args...)
	cmd.Dir = l.dir
	return runProc(l.t, name, cmd, nil)
}

// ctl runs `dxpu ctl` and returns its stdout, or its error with stderr.
func (l *loLab) ctl(args ...string) ([]byte, error) {
	cmd := exec.Command(l.bin, append([]string{"ctl", "--manager", l.mgrURL, "--token-file", l.path("admin.tok"), "--timeout", "60s"}, args...)...)
	cmd.Dir = l.dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("dxpu ctl %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.Bytes(), nil
}

func (l *loLab) mustCtl(args ...string) []byte {
	l.t.Helper()
	out, err := l.ctl(args...)
	if err != nil {
		l.t.Fatal(err)
	}
	return out
}

// newLoLab starts the three daemons and registers the box and the host.
// With proxied set the host is registered with the URL of a proxy in this
// test in front of its agent API, which fails every call while
// hostFailed is set (the agent's data plane keeps running).
func newLoLab(t *testing.T, proxied bool) *loLab {
	l := &loLab{t: t, bin: testbin.Dxpu(t), dir: t.TempDir()}
	mgrPort := freePort(t, "tcp")
	l.mgrURL = fmt.Sprintf("http://127.0.0.1:%d", mgrPort)
	l.mgrArgs = []string{"manager", "--listen", fmt.Sprintf("127.0.0.1:%d", mgrPort), "--store", l.path("pool.db"),
		"--token-file", l.path("admin.tok"), "--init-token", "--allow-insecure-agents", "--reconcile-interval", "1s"}
	l.mgr = l.run("manager", l.mgrArgs...)
	l.mgr.waitLines(t, 1, "manager serving")

	gpuAPI, hostAPI := freePort(t, "tcp"), freePort(t, "tcp")
	gpuUDP, hostUDP := freePort(t, "udp"), freePort(t, "udp")
	l.hostAPI = fmt.Sprintf("http://127.0.0.1:%d", hostAPI)
	hostURL := l.hostAPI
	if proxied {
		target, _ := url.Parse(l.hostAPI)
		rp := httputil.NewSingleHostReverseProxy(target)
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if l.hostFailed.Load() {
				http.Error(w, `{"error":{"code":"unavailable","message":"agent API down (test)"}}`, http.StatusServiceUnavailable)
				return
			}
			rp.ServeHTTP(w, r)
		})}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		hostURL = "http://" + ln.Addr().String()
	}
	box := pool.Box{ID: "box0", Bridge: pool.Endpoint{SwitchPort: "p-box0", MAC: "02:77:00:00:00:02", IP: "127.0.0.1", UDPPort: uint16(gpuUDP)},
		AgentURL: fmt.Sprintf("http://127.0.0.1:%d", gpuAPI),
		GPUs:     []pool.GPU{{ID: "box0-g0", Model: "H100", MemoryMiB: 80 << 10, BDF: "0000:18:00.0"}}}
	writeJSON(t, l.path("box0.json"), box)
	writeJSON(t, l.path("h1.json"), pool.Host{ID: "h1", Ports: 32, AgentURL: hostURL,
		Bridge: pool.Endpoint{SwitchPort: "p-h1", MAC: "02:77:00:00:00:01", IP: "127.0.0.1", UDPPort: uint16(hostUDP)}})
	l.mustCtl("box", "add", l.path("box0.json"), "--agent-credential-out", l.path("box0.cred"))
	l.mustCtl("host", "add", l.path("h1.json"), "--agent-credential-out", l.path("h1.cred"))
	cred, err := os.ReadFile(l.path("h1.cred"))
	if err != nil {
		t.Fatal(err)
	}
	l.hostCred = strings.TrimSpace(string(cred))

	agent := func(api, udp int, extra ...string) []string {
		return append([]string{"bridge", "agent", "--agent-listen", fmt.Sprintf("127.0.0.1:%d", api), "--insecure",
			"--listen", fmt.Sprintf("127.0.0.1:%d", udp), "--dead-after", "2s"}, extra...)
	}
	l.gpu = l.run("box0 agent", agent(gpuAPI, gpuUDP, "--role", "gpu", "--box", l.path("box0.json"), "--agent-credential-file", l.path("box0.cred"))...)
	l.hostArgs = agent(hostAPI, hostUDP, "--role", "host", "--host-id", "h1", "--agent-credential-file", l.path("h1.cred"), "--manager", l.mgrURL)
	l.host = l.run("host agent", l.hostArgs...)
	l.gpu.waitLines(t, 1, "agent API serving")
	l.host.waitLines(t, 1, "agent API serving")
	return l
}

// alloc lends the box's GPU to h1 and waits until the host enumerated it.
func (l *loLab) alloc() pool.Allocation {
	l.t.Helper()
	var a pool.Allocation
	if err := json.Unmarshal(l.mustCtl("--json", "alloc", "--host", "h1", "--count", "1"), &a); err != nil || len(a.GPUs) != 1 {
		l.t.Fatalf("ctl alloc: %+v, %v", a, err)
	}
	l.host.waitLines(l.t, 1, `msg="gpu enumerated"`, "gpu=box0-g0 ")
	return a
}

// healthy fails the test unless the GPU is healthy and lent to a, active.
func (l *loLab) healthy(a pool.Allocation) {
	l.t.Helper()
	var gpus []pool.GPU
	if err := json.Unmarshal(l.mustCtl("--json", "gpu", "--state", "unhealthy"), &gpus); err != nil || len(gpus) != 0 {
		l.t.Fatalf("unhealthy GPUs: %+v, %v", gpus, err)
	}
	var list []pool.Allocation
	if err := json.Unmarshal(l.mustCtl("--json", "alloc", "list", "--host", "h1"), &list); err != nil || len(list) != 1 ||
		list[0].ID != a.ID || list[0].State != pool.StateActive || len(list[0].GPUs) != 1 {
		l.t.Fatalf("allocations: %+v, %v", list, err)
	}
}

// has reports whether p printed a line with every part.
func has(p *proc, parts ...string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices(p.lines, parts...)
}

// bad is a line no daemon may print: its printer and its parts.
type bad struct {
	p     *proc
	parts []string
}

// until waits until ok holds, failing at once when a daemon prints one of
// the bad lines. Progress is any line of any daemon: a pair that keeps
// failing keeps printing, so the bad lines are what end a broken run.
func (l *loLab) until(what string, ok func() bool, bads ...bad) {
	l.t.Helper()
	waitfor.Progress(l.t, what, func() (bool, uint64) {
		for _, b := range bads {
			if has(b.p, b.parts...) {
				l.t.Fatalf("waiting for %s: %s printed a line with %q", what, b.p.name, b.parts)
			}
		}
		var n uint64
		for _, p := range []*proc{l.mgr, l.gpu, l.host} {
			p.mu.Lock()
			n += uint64(len(p.lines))
			p.mu.Unlock()
		}
		return ok(), n
	})
}

// none fails the test if a process printed a line with every part.
func none(t *testing.T, p *proc, parts ...string) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if slices(p.lines, parts...) {
		t.Fatalf("%s printed a line with %q", p.name, parts)
	}
}

// hostStatus reads the host agent's status (directly, not through the
// proxy).
func (l *loLab) hostStatus() bridgeagent.Status {
	l.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, l.hostAPI+"/agent/v1/status", nil)
	req.Header.Set("Authorization", "Bearer "+l.hostCred)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	var st bridgeagent.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || len(st.Pairs) != 1 {
		l.t.Fatalf("host status: %+v, %v", st, err)
	}
	return st
}

// reconcilePasses reads the manager's count of reconciliation passes.
func (l *loLab) reconcilePasses() int {
	l.t.Helper()
	resp, err := http.Get(l.mgrURL + "/metrics")
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "dxpu_reconcile_runs_total "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				l.t.Fatal(err)
			}
			return int(n)
		}
	}
	l.t.Fatal("no dxpu_reconcile_runs_total in the manager's metrics")
	return 0
}

// TestRestartedHostAgentRejoinsPair (issue 20, finding 1): a host agent
// killed and started again gets its pair back under the key the GPU end
// holds, so the link comes up and the GPU is hot-added again; before, the
// reconciler drew a new key for the host end alone, the link never came
// up and the hot-add timed out, for ever.
func TestRestartedHostAgentRejoinsPair(t *testing.T) {
	t.Parallel()
	l := newLoLab(t, false)
	a := l.alloc()
	l.host.stop(t, syscall.SIGKILL)
	l.host = l.run("host agent (restarted)", l.hostArgs...)
	l.host.waitLines(t, 1, "agent API serving")
	// The reconciler restores the pair on it: both ends share the key, the
	// link comes up and the GPU is enumerated through it (its BOOT_0 read
	// crosses the pair).
	l.until("the GPU enumerated on the restarted host", func() bool {
		return has(l.host, `msg="gpu enumerated"`, "gpu=box0-g0 ", "boot0=0x180000a1")
	}, bad{l.mgr, []string{"restoring pair failed"}})
	l.mgr.waitLines(t, 1, `msg="reconcile: restoring lost pair"`)
	none(t, l.gpu, "pair reprogrammed")
	l.healthy(a)
}

// TestKeyGenerationsFollowCounter (issue 20, finding 2): generations are
// a per-pair counter kept in the store, not the clock: after many rekeys
// and a manager restart the agents get exactly the next generation and
// install it on the running bridges. Before, every rekey and every sweep
// drew generations at least the Unix time, ahead of it, and a restarted
// manager's ones were refused ("not newer"), the pair restarted and the
// GPU hot-removed.
func TestKeyGenerationsFollowCounter(t *testing.T) {
	t.Parallel()
	l := newLoLab(t, false)
	a := l.alloc()
	const rekeys = 40
	for range rekeys {
		l.mustCtl("rekey", a.ID)
	}
	l.host.waitLines(t, rekeys, `msg="pair key changed"`)
	l.mgr.stop(t, syscall.SIGTERM)
	l.mgr = l.run("manager (restarted)", l.mgrArgs...)
	l.mgr.waitLines(t, 1, "manager serving")
	// The restarted manager kept no key: it moves the pair to a new one,
	// the generation after the last it issued (1 at alloc, then the rekeys).
	want := fmt.Sprintf(`key="key generation %d"`, 1+rekeys+1)
	var bads []bad
	for _, p := range []*proc{l.host, l.gpu} {
		bads = append(bads, bad{p, []string{"not newer"}}, bad{p, []string{`msg="pair link down"`}}, bad{p, []string{"pair reprogrammed"}})
	}
	bads = append(bads, bad{l.host, []string{`msg="gpu removed"`}}, bad{l.mgr, []string{"not newer"}},
		bad{l.mgr, []string{"re-applying allocation failed"}})
	l.until("generation "+want+" at both ends", func() bool {
		return has(l.host, `msg="pair key changed"`, want) && has(l.gpu, `msg="pair key changed"`, want)
	}, bads...)
	l.healthy(a)
}

// TestRekeyWithHostAPIDownKeepsLink (issue 20, finding 3): a rekey whose
// host end cannot be reached fails (502) but leaves the old key working at
// both ends, since the GPU end only installed the new one (KEY-8); the
// link stays up past DeadAfter, no GPU is removed, and the reconciler
// finishes the change once the host's API is back. Before, the GPU end
// switched at once, the host could not open its frames, the link went
// down and the manager surprise-removed a healthy GPU.
func TestRekeyWithHostAPIDownKeepsLink(t *testing.T) {
	t.Parallel()
	l := newLoLab(t, true)
	a := l.alloc()
	dropped := l.hostStatus().Pairs[0].FramesDropped
	l.hostFailed.Store(true)
	if out, err := l.ctl("rekey", a.ID); err == nil || !strings.Contains(err.Error(), "502") {
		t.Fatalf("ctl rekey with the host's API down: %s, %v; want a 502", out, err)
	}
	// Four reconciliation passes (1s apart) outlast DeadAfter (2s): a key
	// split would have taken the link down by then.
	start := l.reconcilePasses()
	downs := []bad{{l.host, []string{`msg="pair link down"`}}, {l.gpu, []string{`msg="pair link down"`}}, {l.host, []string{`msg="gpu removed"`}}}
	var asked time.Time
	l.until("four reconciliation passes", func() bool {
		if time.Since(asked) < 100*time.Millisecond {
			return false // ask the manager ten times a second at most
		}
		asked = time.Now()
		return l.reconcilePasses() >= start+4
	}, downs...)
	st := l.hostStatus().Pairs[0]
	if st.Link != "up" || st.FramesDropped != dropped {
		t.Fatalf("host end after the failed rekey: link %s, frames dropped %d -> %d", st.Link, dropped, st.FramesDropped)
	}
	for _, p := range []*proc{l.host, l.gpu} {
		none(t, p, `msg="pair link down"`)
	}
	none(t, l.host, `msg="gpu removed"`)
	l.healthy(a)
	// The API is back: the reconciler completes the change, both ends
	// switch to the generation the failed rekey drew.
	l.hostFailed.Store(false)
	l.until("the key change completed at both ends", func() bool {
		return has(l.mgr, `msg="reconcile: key change completed"`) &&
			has(l.host, `msg="pair key changed"`, `key="key generation 2"`) && has(l.gpu, `msg="pair key changed"`, `key="key generation 2"`)
	}, downs...)
	l.healthy(a)
}
