//go:build linux

package waitfor

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestGroupGuardOutlivesItsHolder: a process that ran a block leaving a
// daemon in the background (the docs tests' shells) is killed with
// SIGKILL, so no cleanup of its runs; the daemon dies with it. Without
// the guard it lived on, holding what it held.
func TestGroupGuardOutlivesItsHolder(t *testing.T) {
	t.Parallel()
	p := childCmd("guarded")
	p.Stderr = os.Stderr
	out, err := p.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Wait()
	defer p.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("no daemon PID from the holder: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	// $! is the background subshell, sleep once it has exec'd.
	Until(t, "the daemon to run", func() bool { return !Exited(pid, "sleep") })
	if err := p.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.Wait()
	Until(t, "the daemon to die with its holder", func() bool { return Exited(pid, "sleep") })
}

// TestGroupGuardForgets: Close kills the groups still listed, not one
// forgotten (whose ID the kernel may give another group), and Kill kills
// at once.
func TestGroupGuardForgets(t *testing.T) {
	t.Parallel()
	g, err := NewGroupGuard()
	if err != nil {
		t.Fatal(err)
	}
	var sleeps [3]*exec.Cmd
	for i := range sleeps {
		c := exec.Command("sleep", "600")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		if err := g.Add(c.Process.Pid); err != nil {
			t.Fatal(err)
		}
		sleeps[i] = c
	}
	if err := g.Forget(sleeps[1].Process.Pid); err != nil {
		t.Fatal(err)
	}
	exited := func(c *exec.Cmd) chan struct{} {
		ch := make(chan struct{})
		go func() { c.Wait(); close(ch) }()
		return ch
	}
	done0 := exited(sleeps[0])
	if err := g.Kill(sleeps[0].Process.Pid); err != nil {
		t.Fatal(err)
	}
	<-done0
	done2 := exited(sleeps[2])
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	<-done2 // killed by Close
	if err := sleeps[1].Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the forgotten group was killed: %v", err)
	}
}
