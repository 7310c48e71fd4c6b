package bridgeagent_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/manager/agentapi"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/app/bridgeagent"
	"github.com/dxpu/dxpu/internal/testbin"
	"github.com/dxpu/dxpu/internal/testcert"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// tlsManager is a fake manager over https with a certificate for
// 127.0.0.1 that issuer signs: it takes every report, counts them and the
// handshakes the client broke off.
type tlsManager struct {
	srv     *httptest.Server
	reports atomic.Int64
	mu      sync.Mutex
	refused int
}

func newTLSManager(t *testing.T, issuer testcert.Pair) *tlsManager {
	t.Helper()
	leaf := testcert.Write(t, t.TempDir(), testcert.Options{Serial: 5, CommonName: "manager", Issuer: &issuer, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	c, err := tls.LoadX509KeyPair(leaf.CertFile, leaf.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	m := &tlsManager{}
	m.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.reports.Add(1)
		w.Write([]byte("{}\n"))
	}))
	m.srv.TLS = &tls.Config{Certificates: []tls.Certificate{c}}
	m.srv.Config.ErrorLog = log.New(m, "", 0)
	m.srv.StartTLS()
	t.Cleanup(m.srv.Close)
	return m
}

// Write takes the server's error log: a client that refuses the
// certificate sends "bad certificate".
func (m *tlsManager) Write(p []byte) (int, error) {
	if strings.Contains(string(p), "TLS handshake error") && strings.Contains(string(p), "bad certificate") {
		m.mu.Lock()
		m.refused++
		m.mu.Unlock()
	}
	return len(p), nil
}

func (m *tlsManager) refusals() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.refused
}

// TestAgentReloadsManagerCAOnHUP: `dxpu bridge agent --manager https://...
// --manager-ca-file` trusting CA A refuses a manager whose certificate CA
// B signs: the link-down of its pair (the host's end removed) is retried,
// each attempt's handshake broken off, no report reaching the manager.
// Once the file holds B, SIGHUP (logged with the flag, the file and the
// count) makes new connections trust B, and the report goes through. A
// reload of a file that is not PEM is one error line naming the flag and
// the file. Before, the file was read once at start.
func TestAgentReloadsManagerCAOnHUP(t *testing.T) {
	t.Parallel()
	bin := testbin.Dxpu(t)
	dir := t.TempDir()
	caA := testcert.Write(t, t.TempDir(), testcert.Options{Serial: 0xA, CommonName: "CA A", CA: true})
	caB := testcert.Write(t, t.TempDir(), testcert.Options{Serial: 0xB, CommonName: "CA B", CA: true})
	mgr := newTLSManager(t, caB)
	caFile := filepath.Join(dir, "manager-ca.pem")
	if err := os.WriteFile(caFile, caA.PEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	cred := filepath.Join(dir, "agent.cred")
	credential, err := manager.CreateTokenFile(cred)
	if err != nil {
		t.Fatal(err)
	}
	gpuPort := freePort(t, "udp")
	cmd := exec.Command(bin, "bridge", "agent", "--role", "gpu", "--insecure",
		"--agent-listen", fmt.Sprintf("127.0.0.1:%d", freePort(t, "tcp")), "--agent-credential-file", cred,
		"--listen", fmt.Sprintf("127.0.0.1:%d", gpuPort), "--manager", mgr.srv.URL, "--manager-ca-file", caFile)
	cmd.Dir = dir
	p := runProc(t, "gpu agent", cmd, nil)
	api := field(t, p.waitLines(t, 1, `msg="agent API serving"`)[0], "url")

	// The host's end in this process: the link comes up, then goes down
	// when the host's end is removed.
	ctx, cancel := context.WithCancel(t.Context())
	host, err := bridgeagent.Start(ctx, bridgeagent.Options{Role: bridge.RoleHost, Ports: bridgeagent.MinPorts, HostID: "h1",
		Insecure: true, Credential: "host-credential", Listen: netip.MustParseAddrPort("127.0.0.1:0"), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); host.Wait() })
	cl, err := agentapi.NewClient(agentapi.ClientConfig{AllowInsecure: true})
	if err != nil {
		t.Fatal(err)
	}
	pair := manager.Pair{ID: 7, Allocation: "a-1", Host: "h1", Box: "box0", GPU: "box0-g0", Model: "H100",
		HostBridge: pool.Endpoint{IP: "127.0.0.1", UDPPort: host.DataPlane().Port()},
		GPUBridge:  pool.Endpoint{IP: "127.0.0.1", UDPPort: uint16(gpuPort)}, GPUAgent: api, GPUAgentCredential: credential,
		Key: manager.PairKey{Generation: 1, Key: [32]byte{7, 7, 7}}}
	if err := (agentapi.GPUSide{Client: cl}).ProgramPair(t.Context(), pair); err != nil {
		t.Fatal(err)
	}
	if err := host.ProgramPair(t.Context(), pair); err != nil {
		t.Fatal(err)
	}
	p.waitLines(t, 1, "pair link up")
	if err := host.RemovePair(t.Context(), pair); err != nil {
		t.Fatal(err)
	}
	p.waitLines(t, 2, "reporting pair link down failed; retrying", "certificate signed by unknown authority")
	if n := mgr.reports.Load(); n != 0 || mgr.refusals() == 0 {
		t.Fatalf("%d reports reached the manager CA B signs, %d handshakes refused, while the agent trusted only A; want none, some", n, mgr.refusals())
	}

	if err := os.WriteFile(caFile, caB.PEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// Bounded waits: the retries keep printing, which waitLines takes
	// for progress.
	waitfor.Until(t, "the CA reload logged", func() bool { return has(p, "SIGHUP: CA file reloaded") })
	line := p.waitLines(t, 1, "SIGHUP: CA file reloaded")[0]
	if !strings.Contains(line, "flag=--manager-ca-file file="+caFile+" certificates=1") {
		t.Errorf("reload logged %q, want the flag, the file and 1 certificate", line)
	}
	waitfor.Until(t, "the link-down reported", func() bool {
		return has(p, "reported pair link down to the manager") && mgr.reports.Load() > 0
	})

	if err := os.WriteFile(caFile, []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, "the failed CA reload logged", func() bool { return has(p, "SIGHUP: CA file not reloaded") })
	got := p.waitLines(t, 1, "SIGHUP: CA file not reloaded")
	want := "--manager-ca-file " + caFile + ": holds no PEM certificate"
	if len(got) != 1 || !strings.Contains(got[0], want) || !strings.Contains(got[0], "level=ERROR") {
		t.Errorf("failed reload logged %q, want one error line holding %q", got, want)
	}
	p.stop(t, syscall.SIGTERM)
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("agent exit %d after SIGTERM, want 0", code)
	}
}
