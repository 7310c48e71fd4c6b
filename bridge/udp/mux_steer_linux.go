package udp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// steering holds a mux's SO_REUSEPORT group (see mux_steer.go).
type steering struct {
	mu    sync.Mutex
	main  *Conn   // place 0: the mux's socket, bound to the group's address
	socks []*Conn // place i+1: a pair's socket, held or idle
	place map[uint32]uint32
	idle  []uint32 // places of sockets no pair holds
}

// listenReusePort binds a UDP socket with SO_REUSEPORT to local; before
// the bind, if first is set, it attaches the steering program of no pair.
func listenReusePort(local netip.AddrPort, first bool) (*net.UDPConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
			if serr == nil && first {
				serr = attachSteering(int(fd), nil)
			}
		}); err != nil {
			return err
		}
		return serr
	}}
	pc, err := lc.ListenPacket(context.Background(), "udp", local.String())
	if err != nil {
		return nil, err
	}
	return pc.(*net.UDPConn), nil
}

// listenMuxSocket binds the mux's socket: with steer, the first of an
// SO_REUSEPORT group with the steering program attached, where the
// kernel takes both (else a plain socket, every pair through the
// queues).
//
// The program is attached before the bind. That makes the socket a group
// of its own, which the kernel binds only to a port no other socket
// holds, as a plain bind: a second agent on the port fails with
// EADDRINUSE instead of joining, and port 0 never picks a port another
// group of this user holds (a socket with SO_REUSEPORT alone may join
// one). No socket is closed and bound again, so no copy of a closed
// socket's descriptor held by a child between fork and exec can take
// the port in between.
func listenMuxSocket(local netip.AddrPort, steer bool) (*Conn, *steering, error) {
	if steer {
		uc, err := listenReusePort(local, true)
		if err == nil {
			c, err := newConn(uc, local, netip.AddrPort{})
			if err != nil {
				return nil, nil, err
			}
			return c, &steering{main: c, place: map[uint32]uint32{}}, nil
		}
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, nil, listenError(local, err)
		}
		// A kernel without SO_REUSEPORT or its programs: a plain socket.
	}
	c, err := listenPlain(local, netip.AddrPort{})
	return c, nil, err
}

// attachSteering attaches to fd the program that steers each pair of
// place to its socket (nil: none, every frame to the mux's).
func attachSteering(fd int, place map[uint32]uint32) error {
	raw, err := bpf.Assemble(steerProgram(place))
	if err != nil {
		return fmt.Errorf("udp: mux: steering program: %w", err)
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: unsafe.SliceData(filter)}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_CBPF, &prog); err != nil {
		return fmt.Errorf("udp: mux: SO_ATTACH_REUSEPORT_CBPF: %w", err)
	}
	return nil
}

// attach replaces the group's program with one for the places now held.
// Called with mu held.
func (st *steering) attach() error {
	var serr error
	if err := st.main.sys.rc.Control(func(fd uintptr) { serr = attachSteering(int(fd), st.place) }); err != nil {
		return err
	}
	return serr
}

// open gives pair a socket of its own in the group, sending to peer, and
// steers its frames there.
func (st *steering) open(pair uint32, peer netip.AddrPort) (*Conn, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.place) >= maxSteered {
		return nil, errNoSteering
	}
	var at uint32
	var c *Conn
	if n := len(st.idle); n > 0 {
		at, st.idle = st.idle[n-1], st.idle[:n-1]
		c = st.socks[at-1]
		c.reuse()
	} else {
		local := st.main.LocalAddr()
		uc, err := listenReusePort(local, false)
		if err != nil {
			return nil, fmt.Errorf("udp: mux: pair %d: %w", pair, err)
		}
		if c, err = newConn(uc, local, netip.AddrPort{}); err != nil {
			return nil, fmt.Errorf("udp: mux: pair %d: %w", pair, err)
		}
		st.socks = append(st.socks, c)
		at = uint32(len(st.socks))
	}
	c.anySource = true // as the mux: each pair's bridge checks its frames
	c.SetPeer(peer)
	st.place[pair] = at
	if err := st.attach(); err != nil {
		delete(st.place, pair)
		st.idle = append(st.idle, at)
		return nil, err
	}
	return c, nil
}

// release stops steering pair's frames to its socket (they go to the
// mux's, which counts them as of an unknown pair) and keeps the socket
// for the next pair.
func (st *steering) release(pair uint32) {
	st.mu.Lock()
	defer st.mu.Unlock()
	at, ok := st.place[pair]
	if !ok {
		return
	}
	delete(st.place, pair)
	_ = st.attach() // on a failure the old program stays: the socket's frames wait there, read by nobody
	st.idle = append(st.idle, at)
}

// close closes the pair sockets (the mux closes its own).
func (st *steering) close() {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, c := range st.socks {
		c.Close()
	}
}

// unblock makes a wait on c return at once (a released pair's runner
// waiting in WaitReadable); reuse undoes it.
func (c *Conn) unblock() { _ = c.c.SetReadDeadline(time.Unix(1, 0)) }

// reuse readies a released pair socket for another pair: waits no longer
// end at once, and what the last pair left queued is dropped.
func (c *Conn) reuse() {
	_ = c.c.SetReadDeadline(time.Time{})
	bufs, sizes := [][]byte{make([]byte, MaxPayload)}, []int{0}
	c.anySource = true
	for {
		n, err := c.TryRecvBatch(bufs, sizes)
		if n == 0 || err != nil {
			return
		}
	}
}

// errNoSteering: the pair goes through the mux's queues.
var errNoSteering = errors.New("udp: mux: no steering")

// steeredTry and steeredWait are a steered pair's receive (TryRecvBatch
// and WaitReadable; elsewhere no pair is steered).
func (c *Conn) steeredTry(bufs [][]byte, sizes []int) (int, error) {
	return c.TryRecvBatch(bufs, sizes)
}
func (c *Conn) steeredWait() error { return c.WaitReadable() }
