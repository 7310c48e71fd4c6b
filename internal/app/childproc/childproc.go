//go:build linux

// Package childproc starts the processes a dxpu command runs for the
// length of its work (a bench's bridges, a chaos campaign's daemons, an
// etcd cluster, QEMU) so that they die with it: killed, crashed or run
// out of memory, dxpu leaves none of them holding ports, namespaces or a
// GPU's memory.
//
// A child gets SIGKILL as its parent-death signal. The kernel sends that
// signal when the thread that forked the child ends, not the process; Go
// forks on whatever thread the calling goroutine runs on, and the runtime
// ends a thread when a goroutine that locked it returns without
// unlocking, as every network-namespace Do does (the thread stays in the
// namespace and must not be reused). So Start forks from a thread of its
// own, locked, that lives until the child has exited.
package childproc

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Start starts cmd as Cmd.Start does, with SIGKILL as its parent-death
// signal (its other SysProcAttr settings kept). enter, if not nil, runs on
// the forking thread first: entering a network namespace there puts the
// child in it (netns.NS.Enter). The caller waits for cmd as usual.
func Start(cmd *exec.Cmd, enter func() error) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if enter != nil {
			// The thread is changed for good: never unlocked, it ends
			// with this goroutine.
			if err := enter(); err != nil {
				errc <- fmt.Errorf("childproc: %w", err)
				return
			}
		}
		err := cmd.Start()
		errc <- err
		if err == nil {
			waitExit(cmd.Process.Pid)
		}
		if enter == nil {
			runtime.UnlockOSThread()
		}
	}()
	return <-errc
}

// waitExit returns once process pid has exited, without reaping it (the
// caller's Wait does that): through a pidfd, which becomes readable at
// the exit; where the kernel has none (before Linux 5.3), by polling
// until the reaped pid is gone.
func waitExit(pid int) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		for !errors.Is(unix.Kill(pid, 0), unix.ESRCH) {
			time.Sleep(100 * time.Millisecond)
		}
		return
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); !errors.Is(err, unix.EINTR) {
			return
		}
	}
}
