package ctl

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/internal/app/apperr"
)

// TestCredentialOutBeforeRegistration: an --agent-credential-out that
// cannot be created fails `ctl box add` before the manager is asked (the
// box was registered and its credential lost); a registration the manager
// refuses leaves no empty credential file behind; one it takes gets its
// credential written.
func TestCredentialOutBeforeRegistration(t *testing.T) {
	t.Parallel()
	o, dir := testManager(t, manager.Config{})
	box := strings.Replace(BoxExample, `"udp_port": 8855}`, `"udp_port": 8855}, "agent_url": "https://10.77.0.20:7701"`, 1)
	boxFile := filepath.Join(dir, "box.json")
	os.WriteFile(boxFile, []byte(box), 0o600)

	o.CredentialOut = filepath.Join(dir, "nodir", "box1.cred")
	if _, err := do(t, o, func(ctx context.Context, o Options) error { return AddBox(ctx, o, boxFile) }); !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), "nodir") {
		t.Fatalf("an --agent-credential-out in a missing directory: %v, want a usage error naming it", err)
	}
	if boxes, err := do(t, o, func(ctx context.Context, o Options) error { return Box(ctx, o, "") }); err != nil || strings.Contains(boxes, "box1") {
		t.Fatalf("the box was registered although its credential could not be kept (%v):\n%s", err, boxes)
	}

	// No agent_url: no credential will come, so the box is not
	// registered (it was, and the command then failed).
	plain := filepath.Join(dir, "plain.json")
	os.WriteFile(plain, []byte(BoxExample), 0o600)
	o.CredentialOut = filepath.Join(dir, "plain.cred")
	if _, err := do(t, o, func(ctx context.Context, o Options) error { return AddBox(ctx, o, plain) }); !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), "no agent_url") {
		t.Fatalf("--agent-credential-out for a box without agent_url: %v, want a usage error", err)
	}
	if boxes, _ := do(t, o, func(ctx context.Context, o Options) error { return Box(ctx, o, "") }); strings.Contains(boxes, "box1") {
		t.Fatalf("the box without agent_url was registered:\n%s", boxes)
	}
	if _, err := os.Lstat(o.CredentialOut); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s left behind (%v)", o.CredentialOut, err)
	}

	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(strings.Replace(box, `"id": "box1"`, `"id": "box/1"`, 1)), 0o600)
	o.CredentialOut = filepath.Join(dir, "refused.cred")
	if _, err := do(t, o, func(ctx context.Context, o Options) error { return AddBox(ctx, o, bad) }); err == nil {
		t.Fatal("a box id with '/' registered")
	}
	if _, err := os.Lstat(o.CredentialOut); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after a refused registration %s is left (%v)", o.CredentialOut, err)
	}

	o.CredentialOut = filepath.Join(dir, "box1.cred")
	if _, err := do(t, o, func(ctx context.Context, o Options) error { return AddBox(ctx, o, boxFile) }); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(o.CredentialOut); err != nil || len(strings.TrimSpace(string(b))) < 32 {
		t.Fatalf("credential file: %q, %v", b, err)
	}
}
