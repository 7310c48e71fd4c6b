package bridgeagent_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/internal/testbin"
	"github.com/dxpu/dxpu/internal/testcert"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// writePair writes a self-signed certificate for 127.0.0.1 with serial
// and its key over cert.pem and key.pem in dir (both 0600).
func writePair(t *testing.T, dir string, serial int64) (certFile, keyFile string) {
	t.Helper()
	p := testcert.Write(t, dir, testcert.Options{Serial: serial, CommonName: "agent", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	return p.CertFile, p.KeyFile
}

// TestAgentReloadsTLSOnHUP: `dxpu bridge agent --agent-cert --agent-key`
// serves a pair written over its files after SIGHUP (with the credential
// re-read as before); a reload of a 0644 key keeps the pair served, the
// agent running, and is one line naming the key. Before, the files were
// read once at start.
func TestAgentReloadsTLSOnHUP(t *testing.T) {
	t.Parallel()
	bin := testbin.Dxpu(t)
	dir := t.TempDir()
	cert, key := writePair(t, dir, 1)
	cred := filepath.Join(dir, "agent.cred")
	if _, err := manager.CreateTokenFile(cred); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "bridge", "agent", "--role", "host", "--agent-listen", fmt.Sprintf("127.0.0.1:%d", freePort(t, "tcp")),
		"--agent-cert", cert, "--agent-key", key, "--agent-credential-file", cred,
		"--listen", fmt.Sprintf("127.0.0.1:%d", freePort(t, "udp")))
	cmd.Dir = dir
	p := runProc(t, "host agent", cmd, nil)
	addr := strings.TrimPrefix(field(t, p.waitLines(t, 1, `msg="agent API serving"`)[0], "url"), "https://")
	if s, err := testcert.ServedSerial(addr); err != nil || s != 1 {
		t.Fatalf("first handshake: serial %d, %v; want 1", s, err)
	}

	writePair(t, dir, 2)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	line := p.waitLines(t, 1, "SIGHUP: TLS certificate reloaded")[0]
	if !strings.Contains(line, "file="+cert) || !strings.Contains(line, "serial=2 ") || !strings.Contains(line, "flag=--agent-cert") {
		t.Errorf("reload logged %q, want --agent-cert, its file and serial 2", line)
	}
	waitfor.Until(t, "serial 2 served after SIGHUP", func() bool {
		s, err := testcert.ServedSerial(addr)
		return err == nil && s == 2
	})

	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	got := p.waitLines(t, 1, "SIGHUP: TLS certificate not reloaded")
	p.waitLines(t, 2, "SIGHUP: agent credential reloaded") // the credential still is
	want := "--agent-key " + key + ": mode 0644 lets group or others read or write it"
	if len(got) != 1 || !strings.Contains(got[0], want) || !strings.Contains(got[0], "level=ERROR") {
		t.Errorf("failed reload logged %q, want one error line holding %q", got, want)
	}
	if s, err := testcert.ServedSerial(addr); err != nil || s != 2 {
		t.Errorf("after a reload of a 0644 key: serial %d, %v; want 2 still served", s, err)
	}
	p.stop(t, syscall.SIGTERM)
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("agent exit %d after SIGTERM, want 0", code)
	}
	if got := p.waitLines(t, 1, "TLS certificate not reloaded"); len(got) != 1 {
		t.Errorf("one failed reload logged %d lines, want 1:\n%s", len(got), strings.Join(got, "\n"))
	}
}
