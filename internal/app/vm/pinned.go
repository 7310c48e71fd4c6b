package vm

import (
	"os/exec"
	"runtime"
)

// startPinned starts cmd from an OS thread of its own that stays alive
// until exited is closed (cmd has exited).
//
// QEMU runs with Pdeathsig, so that it dies with dxpu; but the kernel sends
// that signal when the thread that forked the child exits, not the
// process. Go forks on whatever thread the calling goroutine runs on, and
// the runtime ends a thread when a goroutine that locked it returns
// without unlocking, as every network-namespace Do does (the thread stays
// in the namespace and must not be reused). Such a goroutine, landing on
// the thread that forked QEMU, would kill the guest mid-run.
func startPinned(cmd *exec.Cmd, exited <-chan struct{}) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		err := cmd.Start()
		errc <- err
		if err == nil {
			<-exited
		}
		runtime.UnlockOSThread()
	}()
	return <-errc
}
