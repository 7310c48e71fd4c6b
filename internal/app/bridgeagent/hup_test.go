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

// TestReloadOnHUPSubscribedOnReturn: a SIGHUP sent the moment CatchHUP
// returns is taken (the credential reloads), even before the reloading
// goroutine runs. A supervisor rotates the credential and signals as soon
// as the agent says it serves: were the subscription left to a goroutine,
// that SIGHUP could meet its default action and end the process (make
// stress saw a host agent vanish so, 2 runs in 3).
func TestReloadOnHUPSubscribedOnReturn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cred")
	if err := os.WriteFile(path, []byte("rotated\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &Agent{}
	a.SetCredential("first")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hup := CatchHUP()
	go ReloadCredentialOnHUP(ctx, hup, a, path, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, "the credential reloaded on SIGHUP", func() bool { return a.credential() == "rotated" })
}
