package mmsg

import (
	"bytes"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/internal/waitfor"
)

// blockingPair returns a connected datagram socketpair whose receiving end
// b blocks, with SO_RCVTIMEO set as on the switch's packet sockets: the
// calls' flags, not the socket, must keep them from waiting.
func blockingPair(t *testing.T) (a, b int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
	// Long: a call that wrongly waits is unblocked by the tests' shutdown
	// long before. Any timeout makes a signal interrupt a receive with
	// EINTR instead of restarting it.
	tv := unix.NsecToTimeval((10 * time.Minute).Nanoseconds())
	if err := unix.SetsockoptTimeval(fds[1], unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	return fds[0], fds[1]
}

// returnsPromptly runs fn and fails the test if it still runs after
// waitfor.Stall, shutting fd down to end the call stuck in the kernel.
func returnsPromptly(t *testing.T, what string, fd int, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { fn(); close(done) }()
	select {
	case <-done:
	case <-time.After(waitfor.Stall):
		unix.Shutdown(fd, unix.SHUT_RDWR)
		<-done
		t.Fatalf("%s on an empty blocking socket waited for a datagram: it must return at once", what)
	}
}

func oneRecvHeader(buf []byte) *unix.Mmsghdr {
	iov := &unix.Iovec{Base: &buf[0]}
	iov.SetLen(len(buf))
	h := &unix.Mmsghdr{}
	h.Hdr.Iov = iov
	h.Hdr.SetIovlen(1)
	return h
}

// The flags given to Init reach the system call: MSG_DONTWAIT keeps a
// recvmmsg on a blocking socket from waiting; Peek never waits.
func TestCallFlagsOnBlockingSocket(t *testing.T) {
	_, b := blockingPair(t)
	var buf [64]byte
	var recv Call
	recv.Init(unix.SYS_RECVMMSG, oneRecvHeader(buf[:]), unix.MSG_DONTWAIT)
	recv.N = 1
	returnsPromptly(t, "recvmmsg with MSG_DONTWAIT", b, func() { recv.Ctl(uintptr(b)) })
	if recv.Done != 0 || recv.Err != nil {
		t.Fatalf("recvmmsg with MSG_DONTWAIT on an empty blocking socket: Done %d, Err %v; want 0, nil", recv.Done, recv.Err)
	}
	peek := NewPeek()
	var queued bool
	returnsPromptly(t, "Peek", b, func() { queued = peek.Fn(uintptr(b)) })
	if queued {
		t.Fatal("Peek on an empty blocking socket reported something queued")
	}
}

// A signal that interrupts a blocked receive (EINTR) makes the call again:
// it does not return with the previous call's Done and Err as if it had
// received something.
func TestCallRetriesInterrupted(t *testing.T) {
	a, b := blockingPair(t)
	var buf [64]byte
	h := oneRecvHeader(buf[:])
	var recv Call
	recv.Init(unix.SYS_RECVMMSG, h, 0)
	recv.N = 1
	recv.Done, recv.Err = -1, unix.EIO // stale: the call must overwrite them

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	defer signal.Stop(sig)

	tids := make(chan int, 1)
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread() // the thread the signal goes to
		defer runtime.UnlockOSThread()
		tids <- unix.Gettid()
		recv.Ctl(uintptr(b))
		close(done)
	}()
	tid := <-tids
	stop := func() { unix.Shutdown(b, unix.SHUT_RDWR); <-done }
	// /proc's syscall file names the call a thread is blocked in.
	path := fmt.Sprintf("/proc/self/task/%d/syscall", tid)
	if _, err := os.ReadFile(path); err != nil {
		stop()
		t.Skipf("cannot see the receiving thread's system call: %v", err)
	}
	want := fmt.Sprint(unix.SYS_RECVMMSG) + " "
	waitfor.Until(t, "the receiving thread blocked in recvmmsg", func() bool {
		s, _ := os.ReadFile(path)
		return strings.HasPrefix(string(s), want)
	})
	if err := unix.Tgkill(unix.Getpid(), tid, unix.SIGUSR1); err != nil {
		stop()
		t.Fatal(err)
	}
	select {
	case <-sig: // handled on that thread: its recvmmsg returned EINTR
	case <-time.After(waitfor.Stall):
		stop()
		t.Fatal("SIGUSR1 to the receiving thread never arrived")
	}
	msg := []byte("after the signal")
	if _, err := unix.Write(a, msg); err != nil {
		stop()
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(waitfor.Stall):
		stop()
		t.Fatal("recvmmsg never returned the datagram sent after the signal")
	}
	if recv.Done != 1 || recv.Err != nil || !bytes.Equal(buf[:h.Len], msg) {
		t.Fatalf("recvmmsg interrupted by a signal: Done %d, Err %v, got %q; want 1, nil, %q (EINTR must be retried)",
			recv.Done, recv.Err, buf[:h.Len], msg)
	}
}

// A failed call leaves Done 0: a caller that reads Done must not take
// the previous call's count again.
func TestCallErrorClearsDone(t *testing.T) {
	var buf [64]byte
	var recv Call
	recv.Init(unix.SYS_RECVMMSG, oneRecvHeader(buf[:]), unix.MSG_DONTWAIT)
	recv.N = 1
	recv.Done = 7
	recv.Ctl(^uintptr(0)) // descriptor -1: EBADF
	if recv.Err != unix.EBADF || recv.Done != 0 {
		t.Fatalf("recvmmsg on a bad descriptor: Done %d, Err %v; want 0, %v", recv.Done, recv.Err, unix.EBADF)
	}
}

// Peek's cycle under RawConn.Read: nothing queued reports false (the
// runtime then waits), the call after that wait reports true without
// looking, and the one after looks again: an empty socket is false once
// more, neither taken for woken forever nor looked at twice per wait.
func TestPeekWakeCycle(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	b := uintptr(fds[1])
	peek := NewPeek()
	for round := range 3 {
		if peek.Fn(b) {
			t.Fatalf("round %d: Peek on an empty socket reported something queued", round)
		}
		if !peek.Fn(b) {
			t.Fatalf("round %d: Peek after the wait it asked for looked again (false): a wake-up must report true without a system call", round)
		}
	}
}
