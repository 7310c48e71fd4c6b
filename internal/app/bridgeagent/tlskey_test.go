package bridgeagent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/privtest"
)

// agentRefuses runs the agent with --agent-cert cert and --agent-key key
// and wants the usage error want before it serves. A regression that
// serves, or blocks on a FIFO, fails here after 10s.
func agentRefuses(t *testing.T, cert, key, want string) {
	t.Helper()
	o := Options{Role: bridge.RoleHost, AgentListen: "127.0.0.1:0", Credential: "cred",
		Listen: netip.MustParseAddrPort("127.0.0.1:0"), CertFile: cert, KeyFile: key,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o, func(*Agent, net.Addr) { cancel() }) }()
	select {
	case err := <-done:
		if !errors.Is(err, apperr.ErrUsage) || err.Error() != want {
			t.Errorf("--agent-key %s: %v, want the usage error %q", key, err, want)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("--agent-key %s: still running after 10s, want the usage error %q", key, want)
	}
}

// TestAgentKeyThroughSecretfile: --agent-key is read as the credential
// is: a key group or others can read, a FIFO (at once) or a directory is
// refused in one line naming the flag, the file and what is wrong.
// tls.LoadX509KeyPair took a 0644 key and served with it.
func TestAgentKeyThroughSecretfile(t *testing.T) {
	t.Parallel()
	cert, key := selfSigned(t)
	dir := filepath.Dir(key)
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.pem")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	agentRefuses(t, cert, key, "--agent-key "+key+": mode 0644 lets group or others read or write it; want 0600 or 0400 (chmod 600 it)")
	agentRefuses(t, cert, fifo, "--agent-key "+fifo+": not a regular file (a FIFO)")
	agentRefuses(t, cert, dir, "--agent-key "+dir+": not a regular file (a directory)")
}

// TestAgentKeyOfAnotherUser: a 0600 --agent-key another user owns is
// refused.
func TestAgentKeyOfAnotherUser(t *testing.T) {
	privtest.Root(t)
	t.Parallel()
	cert, key := selfSigned(t)
	if err := os.Chown(key, 1001, 1001); err != nil {
		t.Fatal(err)
	}
	agentRefuses(t, cert, key, "--agent-key "+key+": owned by uid 1001, not by this process (uid 0)")
}
