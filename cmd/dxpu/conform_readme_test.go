package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/privtest"
)

// conformSection is the README section whose run-marked shell block runs
// the conformance kit against `dxpu bridge` of each role.
const conformSection = "### Protocol spec, conformance kit and C library"

// readmeConformBlock returns the shell block under a <!-- run ... -->
// marker in the README's conformance section.
func readmeConformBlock(t *testing.T) string {
	t.Helper()
	md, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(md), "\n")
	in := false
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "#"):
			in = l == conformSection
		case in && strings.HasPrefix(l, "```sh") && i > 0 && strings.HasPrefix(lines[i-1], "<!-- run"):
			var body []string
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
				body = append(body, lines[i])
			}
			return strings.Join(body, "\n") + "\n"
		}
	}
	t.Fatalf("README.md: no <!-- run --> shell block in %q", conformSection)
	return ""
}

// buildDxpu builds dxpu with go build into a temporary directory and
// returns the directory.
func buildDxpu(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "dxpu"), ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// summaryLine is the kit's last line of a text report.
var summaryLine = regexp.MustCompile(`(?m)^(\d+) pass, (\d+) fail, (\d+) n/a against \S+ \((host|gpu) side\)`)

// TestReadmeConformRuns runs the README's conformance block as written: a
// dxpu built by go build, `dxpu bridge` of each role started as a process
// with the README's flags, `dxpu conform` as a process against each. Both
// runs must end with no rule failed (the script runs under bash -e, so a
// failing kit fails it). Not parallel: the daemons and the kit keep
// real-time bounds.
func TestReadmeConformRuns(t *testing.T) {
	privtest.Loopback(t)
	script := readmeConformBlock(t)
	for _, want := range []string{"dxpu bridge --role gpu", "dxpu conform --role gpu", "dxpu bridge --role host", "dxpu conform --role host"} {
		if !strings.Contains(script, want) {
			t.Fatalf("the README block lacks %q:\n%s", want, script)
		}
	}
	bin := buildDxpu(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	// Its own process group: the daemons it starts go with it, also when
	// the script stops early.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	log := filepath.Join(cmd.Dir, "out.log")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f // a file: a daemon left running would hold a pipe open
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	err = cmd.Wait()
	outb, _ := os.ReadFile(log)
	out := string(outb)
	if err != nil {
		t.Fatalf("the README block failed: %v\n--- script:\n%s--- output:\n%s", err, script, out)
	}
	sides := map[string]bool{}
	for _, m := range summaryLine.FindAllStringSubmatch(out, -1) {
		sides[m[4]] = true
		if pass, _ := strconv.Atoi(m[1]); m[2] != "0" || pass < 40 {
			t.Errorf("%s side: %q, want no rule failed and at least 40 passed", m[4], m[0])
		}
	}
	if !sides["gpu"] || !sides["host"] {
		t.Errorf("a kit report per role wanted, got %v:\n%s", sides, out)
	}
	t.Logf("output:\n%s", out)
}

// TestConformTimerMismatch: the kit with its default timers against a
// `dxpu bridge` with its own (a keepalive of 50 ms, not 1 ms) says so in
// one line and exits 2, printing no rule verdicts. Not parallel: see
// TestReadmeConformRuns.
func TestConformTimerMismatch(t *testing.T) {
	privtest.Loopback(t)
	bin := filepath.Join(buildDxpu(t), "dxpu")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	daemon := exec.CommandContext(ctx, bin, "bridge", "--role", "gpu", "--listen", "127.0.0.26:8855", "--peer", "127.0.0.27:8855",
		"--pcie", "memory", "--insecure-no-keys")
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = daemon.Process.Kill(); _ = daemon.Wait() }()
	var stdout, stderr strings.Builder
	kit := exec.CommandContext(ctx, bin, "conform", "--role", "gpu", "--peer", "udp:127.0.0.26:8855", "--local", "127.0.0.27:8855",
		"--addr", "0x2000000000")
	kit.Stdout, kit.Stderr = &stdout, &stderr
	err := kit.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("dxpu conform: %v, want exit status 2\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	msg := strings.TrimSuffix(stderr.String(), "\n")
	if stdout.Len() != 0 || strings.Contains(msg, "\n") || !strings.Contains(msg, "--keepalive 1ms") {
		t.Errorf("want one line naming --keepalive 1ms and no report\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
	t.Log(msg)
}
