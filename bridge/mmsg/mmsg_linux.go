// Package mmsg makes sendmmsg(2), recvmmsg(2) and a peek at a socket's
// queue through a syscall.RawConn without allocating: the functions that
// RawConn.Read, Write and Control take are built once, with the call, and
// read their arguments from it. The bridges' UDP and raw Ethernet
// transports and the userspace switch move their frames in batches with
// it. Linux only.
package mmsg

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Call is one sendmmsg or recvmmsg over N headers from Hdrs. Set N (and
// Hdrs, to start further into the array), pass Fn to RawConn.Read or
// Write (or Ctl to Control), then read Done and Err.
type Call struct {
	trap  uintptr
	flags uintptr

	Hdrs *unix.Mmsghdr
	N    int   // headers to pass
	Done int   // messages the last call moved
	Err  error // the last call's error (not EAGAIN)

	// Fn makes the call; false (EAGAIN: nothing queued, a full send
	// buffer, or a blocking socket's SO_RCVTIMEO ran out) asks the
	// runtime poller to wait until the socket is ready.
	Fn func(fd uintptr) bool
	// Ctl is Fn for RawConn.Control, which never waits: EAGAIN leaves
	// Done 0 and Err nil.
	Ctl func(fd uintptr)
}

// Init readies m for trap (unix.SYS_SENDMMSG or SYS_RECVMMSG) over the
// headers at hdrs with flags (e.g. unix.MSG_DONTWAIT).
func (m *Call) Init(trap uintptr, hdrs *unix.Mmsghdr, flags uintptr) {
	m.trap, m.Hdrs, m.flags = trap, hdrs, flags
	m.Fn = m.call
	m.Ctl = func(fd uintptr) { m.call(fd) }
}

func (m *Call) call(fd uintptr) bool {
	for {
		n, _, e := unix.Syscall6(m.trap, fd, uintptr(unsafe.Pointer(m.Hdrs)), uintptr(m.N), m.flags, 0, 0)
		switch e {
		case 0:
			m.Done, m.Err = int(n), nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			m.Done, m.Err = 0, nil
			return false
		default:
			m.Done, m.Err = 0, e
		}
		return true
	}
}

// Peek reports whether something is queued on a socket without taking it,
// for RawConn.Read: a wait for a socket to become readable whose frames
// another goroutine may take meanwhile (driver.Poller's WaitReadable).
type Peek struct {
	// Fn looks (recvfrom with MSG_PEEK); once the runtime poller woke the
	// wait it reports true without looking again: a wake-up means
	// something came, and the receive that follows finds it, or finds
	// that another goroutine took it and waits again. Looking again cost
	// a system call per wait. Call it under RawConn.Read only (its read
	// lock orders the calls).
	Fn   func(fd uintptr) bool
	one  [1]byte
	woke bool
}

// NewPeek returns a Peek.
func NewPeek() *Peek {
	p := &Peek{}
	p.Fn = p.peek
	return p
}

func (p *Peek) peek(fd uintptr) bool {
	if p.woke {
		p.woke = false
		return true
	}
	for {
		_, _, e := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&p.one[0])), 1, unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			p.woke = true // RawConn.Read waits, then calls again
			return false
		}
		return true // queued, or an error the next receive reports
	}
}
