package managerd

import (
	"context"
	"crypto/tls"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager/agentapi"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/app/childproc"
	"github.com/dxpu/dxpu/internal/fakeagent"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/testcert"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// countingAgent is a fake GPU box agent over https with a certificate for
// 127.0.0.1 that issuer signs; it counts the requests that reach it and
// the handshakes the client broke off.
type countingAgent struct {
	api      *agentapi.Server
	srv      *httptest.Server
	requests atomic.Int64
	mu       sync.Mutex
	refused  []string // the server's handshake errors
}

func newCountingAgent(t *testing.T, issuer testcert.Pair) *countingAgent {
	t.Helper()
	leaf := testcert.Write(t, t.TempDir(), testcert.Options{Serial: 5, CommonName: "agent", Issuer: &issuer, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	c, err := tls.LoadX509KeyPair(leaf.CertFile, leaf.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	a := &countingAgent{api: agentapi.NewServer(fakeagent.New("gpu"))}
	a.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.requests.Add(1)
		a.api.ServeHTTP(w, r)
	}))
	a.srv.TLS = &tls.Config{Certificates: []tls.Certificate{c}}
	a.srv.Config.ErrorLog = log.New(a, "", 0)
	a.srv.StartTLS()
	t.Cleanup(a.srv.Close)
	return a
}

// Write takes the server's error log.
func (a *countingAgent) Write(p []byte) (int, error) {
	if s := string(p); strings.Contains(s, "TLS handshake error") {
		a.mu.Lock()
		a.refused = append(a.refused, strings.TrimSpace(s))
		a.mu.Unlock()
	}
	return len(p), nil
}

// refusals counts the handshakes the client refused (it sent "bad
// certificate": the agent's certificate failed its verification).
func (a *countingAgent) refusals() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, l := range a.refused {
		if strings.Contains(l, "bad certificate") {
			n++
		}
	}
	return n
}

// TestManagerReloadsAgentCAOnHUP: `dxpu manager --agent-ca-file` trusting
// CA A refuses an agent whose certificate CA B signs (the handshake is
// broken off, no request reaches it); once the file holds B, SIGHUP
// (logged with the flag, the file and the count) makes new connections
// trust B and the reconciler reaches the agent. A file that fails to
// reload (not PEM) is one error line naming the flag and the file, and
// B stays trusted for new connections. Before, the file was read once at
// start.
func TestManagerReloadsAgentCAOnHUP(t *testing.T) {
	caA := testcert.Write(t, t.TempDir(), testcert.Options{Serial: 0xA, CommonName: "CA A", CA: true})
	caB := testcert.Write(t, t.TempDir(), testcert.Options{Serial: 0xB, CommonName: "CA B", CA: true})
	agent := newCountingAgent(t, caB)
	caFile := filepath.Join(t.TempDir(), "agents-ca.pem")
	if err := os.WriteFile(caFile, caA.PEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	p, admin := startManagerBinary(t, "--agent-ca-file", caFile, "--reconcile-interval", "50ms")
	c := ctlclient.New("http://"+p.addr, admin)
	_, cred, err := c.RegisterBoxAgent(t.Context(), pool.Box{ID: "box0", AgentURL: agent.srv.URL,
		Bridge: pool.Endpoint{SwitchPort: "veth-b0", MAC: "02:00:00:00:01:00", IP: "10.1.0.1"}, GPUs: []pool.GPU{{ID: "g0", Model: "H100", MemoryMiB: 81920}}})
	if err != nil {
		t.Fatal(err)
	}
	agent.api.SetCredential(cred)
	waitfor.Until(t, "the manager to refuse the agent's B-signed certificate", func() bool { return agent.refusals() >= 2 })
	if n := agent.requests.Load(); n != 0 {
		t.Fatalf("%d requests reached the agent CA B signs while the manager trusted only A", n)
	}

	if err := os.WriteFile(caFile, caB.PEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	p.hup(t, 1, "SIGHUP: CA file reloaded")
	if got := p.logLines("SIGHUP: CA file reloaded"); !strings.Contains(got[0], "flag=--agent-ca-file file="+caFile+" certificates=1") {
		t.Errorf("reload logged %q, want the flag, the file and 1 certificate", got[0])
	}
	waitfor.Until(t, "a request of the manager at the agent CA B signs", func() bool { return agent.requests.Load() > 0 })

	if err := os.WriteFile(caFile, []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.hup(t, 1, "SIGHUP: CA file not reloaded")
	want := "--agent-ca-file " + caFile + ": holds no PEM certificate"
	if got := p.logLines("SIGHUP: CA file not reloaded"); len(got) != 1 || !strings.Contains(got[0], want) || !strings.Contains(got[0], "level=ERROR") {
		t.Errorf("failed reload logged %q, want one error line holding %q", got, want)
	}
	// New connections still trust B.
	agent.srv.CloseClientConnections()
	n, refused := agent.requests.Load(), agent.refusals()
	waitfor.Until(t, "a request on a new connection after the failed reload", func() bool { return agent.requests.Load() > n })
	if r := agent.refusals(); r != refused {
		t.Errorf("the manager refused the agent %d more times after a failed reload; want B still trusted", r-refused)
	}
}

// tlsEtcd is one etcd member serving clients over https on a fixed
// loopback port, with a data directory that outlives a restart.
type tlsEtcd struct {
	bin, dir, client, peer, log string
	cmd                         *exec.Cmd
}

// start runs the member with pair (signed by a test CA) as its server
// certificate.
func (e *tlsEtcd) start(t *testing.T, pair testcert.Pair) {
	t.Helper()
	logf, err := os.OpenFile(e.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	e.cmd = exec.Command(e.bin, "--name", "m0", "--data-dir", filepath.Join(e.dir, "data"),
		"--listen-client-urls", e.client, "--advertise-client-urls", e.client,
		"--listen-peer-urls", e.peer, "--initial-advertise-peer-urls", e.peer,
		"--initial-cluster", "m0="+e.peer, "--initial-cluster-state", "new", "--initial-cluster-token", "dxpu-ca-test",
		"--cert-file", pair.CertFile, "--key-file", pair.KeyFile,
		"--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn")
	e.cmd.Stdout, e.cmd.Stderr = logf, logf
	if err := childproc.Start(e.cmd, nil); err != nil {
		t.Fatal(err)
	}
	cmd := e.cmd
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
}

func (e *tlsEtcd) stop() {
	e.cmd.Process.Kill()
	e.cmd.Wait()
}

// refusals counts the client connections the member saw broken off for
// a bad certificate (the client refused the member's).
func (e *tlsEtcd) refusals() int {
	b, _ := os.ReadFile(e.log)
	return strings.Count(string(b), "bad certificate")
}

// TestManagerReloadsEtcdCAOnHUP: `dxpu manager --etcd https://...
// --etcd-ca-file` keeps etcd's connections verified against the CA file
// as read last: after etcd comes back with a certificate CA B signs, the
// manager, trusting A, refuses it (etcd logs the bad certificate) and
// cannot write; once the file holds B, SIGHUP (logged with the flag, the
// file and the count) makes the new connections trust B and the manager
// writes again. --etcd names the member by two IP addresses: each
// connection is checked for its own (the file was read once then, and
// the write after SIGHUP failed).
func TestManagerReloadsEtcdCAOnHUP(t *testing.T) {
	bin := privtest.Tool(t, "etcd")
	dir := t.TempDir()
	caA := testcert.Write(t, t.TempDir(), testcert.Options{Serial: 0xA, CommonName: "CA A", CA: true})
	caB := testcert.Write(t, t.TempDir(), testcert.Options{Serial: 0xB, CommonName: "CA B", CA: true})
	ip := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(127, 0, 0, 2)}
	byA := testcert.Write(t, t.TempDir(), testcert.Options{Serial: 1, CommonName: "etcd", Issuer: &caA, IPs: ip})
	byB := testcert.Write(t, t.TempDir(), testcert.Options{Serial: 2, CommonName: "etcd", Issuer: &caB, IPs: ip})
	port := func(host string) string {
		l, err := net.Listen("tcp", host+":0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	client := "https://" + port("127.0.0.1") + ",https://" + port("127.0.0.2")
	e := &tlsEtcd{bin: bin, dir: dir, client: client, peer: "http://" + port("127.0.0.1"), log: filepath.Join(dir, "etcd.log")}
	e.start(t, byA)
	caFile := filepath.Join(dir, "etcd-ca.pem")
	if err := os.WriteFile(caFile, caA.PEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	p, admin := startManagerBinary(t, "--etcd", e.client, "--etcd-ca-file", caFile)
	c := ctlclient.New("http://"+p.addr, admin)
	box := func(i int) pool.Box {
		return pool.Box{ID: fmt.Sprintf("box%d", i), Bridge: pool.Endpoint{SwitchPort: fmt.Sprintf("veth-b%d", i), MAC: fmt.Sprintf("02:00:00:00:01:%02x", i)},
			GPUs: []pool.GPU{{ID: fmt.Sprintf("b%d-g0", i), Model: "H100", MemoryMiB: 81920}}}
	}
	register := func(i int, within time.Duration) error {
		ctx, cancel := context.WithTimeout(t.Context(), within)
		defer cancel()
		_, err := c.RegisterBox(ctx, box(i))
		return err
	}
	waitfor.Until(t, "a write through etcd CA A signs", func() bool { return register(0, 5*time.Second) == nil })

	e.stop()
	e.start(t, byB)
	waitfor.Until(t, "etcd to log the manager's refusal of its B-signed certificate", func() bool { return e.refusals() > 0 })
	if err := register(1, 2*time.Second); err == nil {
		t.Fatal("the manager wrote through etcd CA B signs while trusting only A")
	}

	if err := os.WriteFile(caFile, caB.PEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	p.hup(t, 1, "SIGHUP: CA file reloaded")
	if got := p.logLines("SIGHUP: CA file reloaded"); !strings.Contains(got[0], "flag=--etcd-ca-file file="+caFile+" certificates=1") {
		t.Errorf("reload logged %q, want the flag, the file and 1 certificate", got[0])
	}
	waitfor.Until(t, "a write through etcd CA B signs after SIGHUP", func() bool { return register(2, 5*time.Second) == nil })
}
