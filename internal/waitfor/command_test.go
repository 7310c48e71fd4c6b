//go:build linux

package waitfor

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv makes the test binary a child for Command's tests: its value
// says how the child behaves.
const childEnv = "WAITFOR_TEST_CHILD"

// testStall is the tests' stall: short, so a test takes seconds, yet
// long enough for a loaded machine to give a runnable process some CPU.
const testStall = time.Second

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		child(mode)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// child behaves as mode says, for 3 stalls where it ends by itself.
func child(mode string) {
	end := time.Now().Add(3 * testStall)
	switch mode {
	case "silent": // one line, then a silent wait, beside a silent grandchild
		fmt.Println("waiting on nothing")
		childCmd("idle").Start()
		time.Sleep(time.Hour)
	case "idle":
		time.Sleep(time.Hour)
	case "print": // output, next to no CPU
		for time.Now().Before(end) {
			fmt.Println("still here")
			time.Sleep(testStall / 10)
		}
	case "burn": // CPU, no output
		for n := 0; time.Now().Before(end); n++ {
			_ = n * n
		}
	case "burnchild": // silent itself, its child burns
		childCmd("burn").Run()
	case "guarded": // a block leaving a daemon behind, its group guarded; then killed
		g, err := NewGroupGuard()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		c := exec.Command("bash", "-c", "sleep 600 & echo $!")
		c.Stdout = os.Stdout
		if err := CommandGuarded(c, time.Minute, g); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		time.Sleep(time.Hour)
	}
}

func childCmd(mode string) *exec.Cmd {
	c := exec.Command(os.Args[0], "-test.run=^$")
	c.Env = append(os.Environ(), childEnv+"="+mode)
	return c
}

// A command that sits silent and idle is killed after the stall with its
// whole process group, and the error says what was running.
func TestCommandKillsStalled(t *testing.T) {
	var out bytes.Buffer
	c := childCmd("silent")
	c.Stdout, c.Stderr = &out, &out
	start := time.Now()
	err := Command(c, testStall)
	var se *StallError
	if !errors.As(err, &se) {
		t.Fatalf("err %v, want a StallError", err)
	}
	if since := time.Since(start); since < testStall {
		t.Fatalf("killed after %v, before the stall of %v", since, testStall)
	}
	if !strings.Contains(out.String(), "waiting on nothing") {
		t.Fatalf("output %q", out.String())
	}
	msg := err.Error()
	if len(se.Running) != 2 || !strings.Contains(msg, "no output and no CPU for 1s") || !strings.Contains(msg, filepath.Base(os.Args[0])+" -test.run=^$") {
		t.Fatalf("running %q, error %q", se.Running, msg)
	}
	// The grandchild went with it.
	pgid := c.Process.Pid
	Until(t, "the group gone", func() bool { return syscall.Kill(-pgid, 0) != nil })
}

// A command that prints, or whose process tree uses CPU, outlasts the
// stall: output to a file, output to a writer, CPU of the command and of
// its child each count as progress by themselves.
func TestCommandKeepsMoving(t *testing.T) {
	for _, tc := range []struct {
		mode   string
		toFile bool
	}{{"print", false}, {"print", true}, {"burn", false}, {"burnchild", false}} {
		t.Run(fmt.Sprintf("%s/file=%v", tc.mode, tc.toFile), func(t *testing.T) {
			c := childCmd(tc.mode)
			var buf bytes.Buffer
			c.Stdout = &buf
			if tc.toFile {
				f, err := os.Create(filepath.Join(t.TempDir(), "out"))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				c.Stdout = f
			}
			start := time.Now()
			if err := Command(c, testStall); err != nil {
				t.Fatalf("after %v: %v", time.Since(start), err)
			}
		})
	}
}

// parseStat reads the group and the four CPU times, past a command name
// with spaces and parentheses.
func TestParseStat(t *testing.T) {
	const line = "4242 (a (b) c) S 1 4240 4240 0 -1 4194560 100 0 0 0 7 3 11 -1 20 0 1 0 5 0 0"
	g, cpu, ok := parseStat(line)
	if !ok || g != 4240 || cpu != 7+3+11 {
		t.Fatalf("got %d %d %v", g, cpu, ok)
	}
	if _, _, ok := parseStat("4242 (x) S 1"); ok {
		t.Fatal("a short line parsed")
	}
	if GroupCPU(syscall.Getpgrp()) == 0 {
		t.Fatal("this test's own group used no CPU")
	}
	// This process's CPU grows as it burns.
	before := ProcessCPU(os.Getpid())
	Until(t, "this process's CPU growing", func() bool {
		for end := time.Now().Add(time.Millisecond); time.Now().Before(end); {
		}
		return ProcessCPU(os.Getpid()) > before
	})
	if ProcessCPU(-1) != 0 {
		t.Fatal("CPU for no process")
	}
}

// GroupAlive sees a running group, and not one whose members exited
// (reaped or not).
func TestGroupAlive(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	if !GroupAlive(pgid) {
		t.Fatalf("group %d running, GroupAlive false", pgid)
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	Until(t, "the killed group's member a zombie", func() bool { return !GroupAlive(pgid) })
	_ = cmd.Wait()
	if GroupAlive(pgid) {
		t.Fatalf("group %d gone, GroupAlive true", pgid)
	}
}
