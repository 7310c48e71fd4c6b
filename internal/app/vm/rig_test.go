package vm

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/dxpu/dxpu/internal/privtest"
)

var guestTool struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// vmOptions returns Options for a test guest, skipping (or failing, with
// DXPU_REQUIRE_PRIVILEGED=1) where QEMU, a kernel or busybox is missing.
// The guest tool is built once, static, for all tests.
func vmOptions(t *testing.T) Options {
	t.Helper()
	privtest.Tool(t, "qemu-system-x86_64")
	kernel := privtest.File(t, "/boot/vmlinuz-*")
	bb := privtest.File(t, "/bin/busybox")
	if _, err := CheckQEMU(context.Background(), ""); err != nil {
		t.Fatal(err) // present but unusable: a configuration error
	}
	guestTool.once.Do(func() {
		dir, err := os.MkdirTemp("", "dxpu-guest-build-")
		if err != nil {
			guestTool.err = err
			return
		}
		guestTool.path = filepath.Join(dir, "dxpu-guest")
		cmd := exec.Command("go", "build", "-o", guestTool.path, "github.com/dxpu/dxpu/cmd/dxpu-guest")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		guestTool.out, guestTool.err = cmd.CombinedOutput()
	})
	if guestTool.err != nil {
		t.Fatalf("building dxpu-guest: %v\n%s", guestTool.err, guestTool.out)
	}
	// A directory vm makes itself (0700): it refuses an existing one that
	// others may enter, which t.TempDir's 0755 is under the usual umask.
	dir := filepath.Join(t.TempDir(), "vm")
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "serial.log")); err == nil {
				t.Logf("serial log:\n%s", b)
			}
		}
	})
	return Options{Kernel: kernel, Busybox: bb, GuestTool: guestTool.path, Dir: dir, MemoryMB: 512,
		Log: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(b))
	return len(b), nil
}

func TestMain(m *testing.M) {
	code := m.Run()
	if guestTool.path != "" {
		os.RemoveAll(filepath.Dir(guestTool.path))
	}
	os.Exit(code)
}
