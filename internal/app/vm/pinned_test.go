package vm

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/internal/waitfor"
)

// TestStartPinnedSurvivesThreadExit: a child with Pdeathsig started by
// startPinned from a goroutine that then ends with its thread locked (as
// a network-namespace Do does) lives on; it dies only of the signal the
// test sends it.
func TestStartPinnedSurvivesThreadExit(t *testing.T) {
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
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		exited := make(chan struct{})
		type started struct {
			tid int
			err error
		}
		sc := make(chan started, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
			err := startPinned(cmd, exited)
			sc <- started{unix.Gettid(), err}
		}()
		s := <-sc
		if s.err != nil {
			t.Fatal(s.err)
		}
		defer close(exited)
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
