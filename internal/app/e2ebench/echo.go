package e2ebench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/dxpu/dxpu/bridge/udp"
)

// echoServer answers every datagram on c with the same bytes until c is
// closed.
func echoServer(c *net.UDPConn) {
	buf := make([]byte, 2048)
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		_, _ = c.WriteToUDPAddrPort(buf[:n], from)
	}
}

// echoPath is an open echo baseline: exchange sends tx and returns once
// the answer carrying seq (at seqAt) is back; every datagram starts with
// payload (a dxpu header, so that a switch forwards it).
type echoPath struct {
	payload  []byte
	exchange func(tx []byte, seqAt int, seq uint64, t0 time.Time) error
	close    func()
}

// plainExchange is the exchange of a client socket c in Go's network
// poller: send to peer, then a blocking read, the answer of the right
// length and sequence number ending it (a late answer to an earlier
// datagram is not counted).
func plainExchange(c *net.UDPConn, peer netip.AddrPort) func(tx []byte, seqAt int, seq uint64, t0 time.Time) error {
	rx := make([]byte, 2048)
	return func(tx []byte, seqAt int, seq uint64, _ time.Time) error {
		if _, err := c.WriteToUDPAddrPort(tx, peer); err != nil {
			return fmt.Errorf("to %v: %w", peer, err)
		}
		for {
			if err := c.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
				return fmt.Errorf("deadline: %w", err)
			}
			m, _, err := c.ReadFromUDPAddrPort(rx)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return fmt.Errorf("no answer from %v within 1s", peer)
			}
			if err != nil {
				return err
			}
			if m == len(tx) && getSeq(rx[seqAt:]) == seq {
				return nil
			}
		}
	}
}

// plainEcho is the echo baseline between a client socket c and server
// socket s, both in Go's network poller; the client sends to peer (the
// server, or a switch in front of it). It owns both sockets.
func plainEcho(c, s *net.UDPConn, peer netip.AddrPort, payload []byte) *echoPath {
	go echoServer(s)
	return &echoPath{payload: payload, exchange: plainExchange(c, peer), close: func() { c.Close(); s.Close() }}
}

// echoSize is the size of every echo datagram: as small as an MMIO read's
// frames.
const echoSize = 64

// echoTimer times single round trips of an echo path, numbering each
// datagram.
type echoTimer struct {
	e     *echoPath
	tx    []byte
	seqAt int
	seq   uint64
}

func newEchoTimer(e *echoPath) *echoTimer {
	tx := make([]byte, max(echoSize, len(e.payload)+8))
	copy(tx, e.payload)
	return &echoTimer{e: e, tx: tx, seqAt: len(e.payload)}
}

// once times one round trip.
func (t *echoTimer) once() (time.Duration, error) {
	t.seq++
	putSeq(t.tx[t.seqAt:], t.seq)
	t0 := time.Now()
	if err := t.e.exchange(t.tx, t.seqAt, t.seq, t0); err != nil {
		return 0, fmt.Errorf("e2ebench: echo %d: %w", t.seq, err)
	}
	return time.Since(t0), nil
}

// echoRTTs times n round trips of e, one at a time.
func echoRTTs(ctx context.Context, e *echoPath, n int) ([]time.Duration, error) {
	t := newEchoTimer(e)
	out := make([]time.Duration, 0, n)
	freshHeap()
	for range n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		d, err := t.once()
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func putSeq(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
}

func getSeq(b []byte) uint64 {
	var v uint64
	for i := range 8 {
		v |= uint64(b[i]) << (8 * i)
	}
	return v
}

// busyEcho is the echo between two busy-polling sockets
// (udp.ListenBusyPoll: outside Go's network poller, each end spinning on
// non-blocking receives): the kernel's UDP path with no wake-up on either
// end, the socket kind and polling the bridges use under bench e2e. c
// sends to its peer, s answers to its own; its server spins on a
// processor of its own until close. It owns both sockets.
func busyEcho(c, s *udp.Conn, payload []byte) *echoPath {
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		bufs, sizes := [][]byte{make([]byte, 2048)}, []int{0}
		for !stop.Load() {
			k, err := s.TryRecvBatch(bufs, sizes)
			if err != nil {
				return
			}
			if k == 1 {
				_ = s.Send(bufs[0][:sizes[0]])
			} else {
				runtime.Gosched() // spin, but let other goroutines run on a shared core
			}
		}
	}()
	bufs, sizes := [][]byte{make([]byte, 2048)}, []int{0}
	exchange := func(tx []byte, seqAt int, seq uint64, t0 time.Time) error {
		if err := c.Send(tx); err != nil {
			return fmt.Errorf("busy-poll: %w", err)
		}
		for spins := 0; ; spins++ {
			k, err := c.TryRecvBatch(bufs, sizes)
			if err != nil {
				return fmt.Errorf("busy-poll: %w", err)
			}
			if k == 1 && sizes[0] == len(tx) && getSeq(bufs[0][seqAt:]) == seq {
				return nil
			}
			runtime.Gosched()
			if spins%4096 == 4095 && time.Since(t0) > time.Second {
				return errors.New("busy-poll: no answer within 1s")
			}
		}
	}
	return &echoPath{payload: payload, exchange: exchange, close: func() {
		stop.Store(true)
		<-done
		c.Close()
		s.Close()
	}}
}
