package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/app/childproc"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/syncbuf"
	"github.com/dxpu/dxpu/internal/testcert"
)

// builtRun runs the dxpu that go build made (dxpuBin) with args and
// returns its exit status, stdout and stderr. A daemon that regresses and
// starts (stop, when not empty, appears on stderr) is sent SIGTERM, and
// one that hangs is killed after a minute: the test fails on what it
// printed, not by hanging.
func builtRun(t *testing.T, stop string, args ...string) (int, string, string) {
	t.Helper()
	dir, err := dxpuBin()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "dxpu"), args...)
	var out bytes.Buffer
	var errb syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := childproc.Start(cmd, nil); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	defer close(exited)
	if stop != "" {
		go func() {
			select {
			case <-errb.Await(stop):
				cmd.Process.Signal(syscall.SIGTERM)
			case <-exited:
			}
		}()
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// wantRefusal fails unless dxpu exited 2 with nothing on stdout and the
// one line want on stderr.
func wantRefusal(t *testing.T, args []string, code int, stdout, stderr, want string) {
	t.Helper()
	if code != 2 || stdout != "" || stderr != want+"\n" {
		t.Errorf("dxpu %s: exit %d, stdout %q, stderr %q; want exit 2 and the one line %q", strings.Join(args, " "), code, stdout, stderr, want)
	}
}

// tlsFiles writes, in a new directory, a self-signed certificate for
// 127.0.0.1 (0644: it is public), its private key (0600, as a key must be
// to be taken) and an admin token (0600), and returns their paths.
func tlsFiles(t *testing.T) (cert, key, tok string) {
	t.Helper()
	dir := t.TempDir()
	p := testcert.Write(t, dir, testcert.Options{IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err := os.Chmod(p.CertFile, 0o644); err != nil {
		t.Fatal(err)
	}
	tok = filepath.Join(dir, "admin.tok")
	if err := os.WriteFile(tok, []byte("t0k\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p.CertFile, p.KeyFile, tok
}

// tlsKeyCommands are the command lines that read key as a TLS private
// key, each with the flag that names it and the line its daemon logs
// once it serves.
func tlsKeyCommands(t *testing.T, cert, key, tok string) []struct {
	flag, serving string
	args          []string
} {
	dir := t.TempDir()
	return []struct {
		flag, serving string
		args          []string
	}{
		{"--tls-key", "manager serving", []string{"manager", "--listen", "127.0.0.1:0", "--store", filepath.Join(dir, "m.db"),
			"--token-file", tok, "--tls-cert", cert, "--tls-key", key}},
		{"--agent-key", "agent API serving", []string{"bridge", "agent", "--role", "host", "--agent-listen", "127.0.0.1:0",
			"--agent-credential-file", tok, "--listen", "127.0.0.1:0", "--agent-cert", cert, "--agent-key", key}},
	}
}

// TestTLSKeyModeRefusedByBinary: `dxpu manager --tls-key` and `dxpu bridge
// agent --agent-key` refuse a private key group or others can read (0644,
// 0640) at start, exit 2, in one line naming the flag, the file and what
// is wrong; both served with such a key before it went through
// fabric/secretfile.
func TestTLSKeyModeRefusedByBinary(t *testing.T) {
	t.Parallel()
	cert, key, tok := tlsFiles(t)
	for _, mode := range []os.FileMode{0o644, 0o640} {
		if err := os.Chmod(key, mode); err != nil {
			t.Fatal(err)
		}
		for _, c := range tlsKeyCommands(t, cert, key, tok) {
			code, stdout, stderr := builtRun(t, c.serving, c.args...)
			wantRefusal(t, c.args, code, stdout, stderr, fmt.Sprintf("dxpu: %s %s: mode %#o lets group or others read or write it; want 0600 or 0400 (chmod 600 it)", c.flag, key, mode))
		}
	}
}

// TestTLSKeyOfAnotherUserRefusedByBinary: the same for a 0600 key another
// user owns: its content is theirs to choose, or to read after a chmod.
func TestTLSKeyOfAnotherUserRefusedByBinary(t *testing.T) {
	privtest.Root(t)
	t.Parallel()
	cert, key, tok := tlsFiles(t)
	if err := os.Chown(key, 1001, 1001); err != nil {
		t.Fatal(err)
	}
	for _, c := range tlsKeyCommands(t, cert, key, tok) {
		code, stdout, stderr := builtRun(t, c.serving, c.args...)
		wantRefusal(t, c.args, code, stdout, stderr, "dxpu: "+c.flag+" "+key+": owned by uid 1001, not by this process (uid 0)")
	}
}

// TestUnsealKeyLogModeRefusedByBinary: `dxpu pcap unseal --key-log` refuses
// a key log (traffic secrets) group or others can read, exit 2, one line,
// and writes no OUT; it read a 0644 key log before it went through
// fabric/secretfile.
func TestUnsealKeyLogModeRefusedByBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keys, out := filepath.Join(dir, "keys.log"), filepath.Join(dir, "out.pcap")
	if err := os.WriteFile(keys, []byte("# no secrets\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(keys, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"pcap", "unseal", "--key-log", keys, filepath.Join(repoRoot, "testdata", "pcap", "mix.pcap"), out}
	code, stdout, stderr := builtRun(t, "", args...)
	wantRefusal(t, args, code, stdout, stderr,
		"dxpu: unseal: --key-log "+keys+": mode 0644 lets group or others read or write it; want 0600 or 0400 (chmod 600 it)")
	if _, err := os.Lstat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the key log was refused, yet OUT is there: %v", err)
	}
}
