//go:build linux

package childproc

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/internal/netns"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// parentEnv makes the test binary the parent of TestDiesWithParent: it
// starts `sleep` through Start (in a new network namespace with "netns"),
// prints the child's PID and waits to be killed.
const parentEnv = "DXPU_CHILDPROC_TEST_PARENT"

func TestMain(m *testing.M) {
	if mode, ok := os.LookupEnv(parentEnv); ok {
		os.Exit(parent(mode))
	}
	os.Exit(m.Run())
}

func parent(mode string) int {
	var enter func() error
	if mode == "netns" {
		ns, err := netns.New("childproc-test")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		enter = ns.Enter
	}
	cmd := exec.Command("sleep", "600")
	if err := Start(cmd, enter); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(cmd.Process.Pid)
	// Threads come and go meanwhile, as namespace work ends them: none
	// of that may kill the child.
	for i := 0; i < 8; i++ {
		done := make(chan struct{})
		go func() { runtime.LockOSThread(); close(done) }()
		<-done
	}
	select {}
}

// TestDiesWithParent: a child started by Start is killed when its parent
// dies of SIGKILL, where nothing of the parent can clean up; started from
// inside a namespace too.
func TestDiesWithParent(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"here", "netns"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "netns" {
				privtest.NetNS(t)
			}
			p := exec.Command(os.Args[0], "-test.run=^$")
			p.Env = append(os.Environ(), parentEnv+"="+mode)
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
				t.Fatalf("the parent printed no PID: %v", err)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(line))
			if err != nil {
				t.Fatal(err)
			}
			if mode == "netns" {
				mine, _ := os.Readlink("/proc/self/ns/net")
				its, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
				if err != nil || its == mine {
					t.Errorf("the child's namespace is %q (%v), this test's %q: want a namespace of its own", its, err, mine)
				}
			}
			if waitfor.Exited(pid, "sleep") {
				t.Fatal("the child died before its parent: its parent-death signal came with a thread's end")
			}
			if err := p.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			p.Wait()
			// Orphaned, the child is reparented and reaped: it is gone
			// once it took its signal.
			waitfor.Until(t, "the child to die with its parent", func() bool { return waitfor.Exited(pid, "sleep") })
		})
	}
}

// TestSurvivesThreadExit: a child started by Start from a goroutine that
// then ends with its thread locked (as a network-namespace Do does) lives
// on; it dies only of the signal the test sends it.
func TestSurvivesThreadExit(t *testing.T) {
	t.Parallel()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err) // coreutils: part of any machine these tests run on
	}
	// The runtime parks the main thread instead of ending it: a start
	// from there proves nothing, so it is done again from another.
	var cmd *exec.Cmd
	var tid int
	for try := 0; ; try++ {
		cmd = exec.Command(sleep, "600")
		type started struct {
			tid int
			err error
		}
		sc := make(chan started, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
			err := Start(cmd, nil)
			sc <- started{unix.Gettid(), err}
		}()
		s := <-sc
		if s.err != nil {
			t.Fatal(s.err)
		}
		if tid = s.tid; tid != os.Getpid() {
			break
		}
		if try == 2 {
			t.Fatal("three starts from the main thread")
		}
		cmd.Process.Kill()
		cmd.Wait()
	}
	// Once the locked thread is gone, a Pdeathsig tied to it has been
	// sent: the kernel signals the children before it removes the task.
	task := fmt.Sprintf("/proc/self/task/%d", tid)
	waitfor.Until(t, "the locked thread to exit", func() bool {
		_, err := os.Stat(task)
		return errors.Is(err, os.ErrNotExist)
	})
	// A SIGKILL sent earlier wins over this SIGTERM: the exit status says
	// which one ended the child.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("the child exited with %v, want a signal", err)
	}
	ws := ee.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("the child ended with %v (signalled %v: %v), want the test's SIGTERM: its parent-death signal fired", err, ws.Signaled(), ws.Signal())
	}
}
