package main

import (
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/internal/app/childproc"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// summaryLine is the kit's last line of a text report.
var summaryLine = regexp.MustCompile(`(?m)^(\d+) pass, (\d+) fail, (\d+) n/a against \S+ \((host|gpu) side\)`)

// TestConformTimerMismatch: the kit with its default timers against a
// `dxpu bridge` with its own (a keepalive of 50 ms, not 1 ms) says so in
// one line and exits 2, printing no rule verdicts. Not parallel: the
// daemon and the kit keep real-time bounds.
func TestConformTimerMismatch(t *testing.T) {
	privtest.Loopback(t)
	dir, err := dxpuBin()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "dxpu")
	daemon := exec.Command(bin, "bridge", "--role", "gpu", "--listen", "127.0.0.26:8855", "--peer", "127.0.0.27:8855",
		"--pcie", "memory", "--insecure-no-keys")
	if err := childproc.Start(daemon, nil); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = daemon.Process.Kill(); _ = daemon.Wait() }()
	var stdout, stderr strings.Builder
	kit := exec.Command(bin, "conform", "--role", "gpu", "--peer", "udp:127.0.0.26:8855", "--local", "127.0.0.27:8855",
		"--addr", "0x2000000000")
	kit.Stdout, kit.Stderr = &stdout, &stderr
	err = waitfor.Command(kit, waitfor.CommandStall)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("dxpu conform: %v, want exit status 2\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	msg := strings.TrimSuffix(stderr.String(), "\n")
	// Whichever timer the kit measures first names the mismatch: the
	// keepalive, unless its own stalls under load made it skip those
	// intervals, then the dead-after (make stress saw that once).
	named := strings.Contains(msg, "--keepalive 1ms") || strings.Contains(msg, "--dead-after 10ms")
	if stdout.Len() != 0 || strings.Contains(msg, "\n") || !strings.Contains(msg, "does not match the kit's options") || !named {
		t.Errorf("want one line naming --keepalive 1ms or --dead-after 10ms and no report\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
	t.Log(msg)
}
