package bridgeagent

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/dxpu/dxpu/internal/waitfor"
)

// TestReloadOnHUPSubscribedOnReturn: a SIGHUP sent the moment
// ReloadCredentialOnHUP returns is taken (the credential reloads). The
// daemon announces itself ready after the call, and a supervisor that
// rotates the credential then signals at once: were the subscription left
// to the goroutine, that SIGHUP would meet its default action and end the
// process (make stress saw a host agent vanish so, 2 runs in 3).
func TestReloadOnHUPSubscribedOnReturn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cred")
	if err := os.WriteFile(path, []byte("rotated\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &Agent{}
	a.SetCredential("first")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ReloadCredentialOnHUP(ctx, a, path, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, "the credential reloaded on SIGHUP", func() bool { return a.credential() == "rotated" })
}
