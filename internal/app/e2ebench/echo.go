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

// echoRTTs sends n datagrams of size bytes from c to peer one at a time
// and times each answer: the baseline of what the network and the Go
// runtime's socket path cost a round trip. Each datagram carries its
// sequence number, so a late answer to an earlier one is not counted.
// payload, when set, is copied to the front of each datagram (a dxpu
// header, so that a switch forwards it).
func echoRTTs(ctx context.Context, c *net.UDPConn, peer netip.AddrPort, n, size int, payload []byte) ([]time.Duration, error) {
	rx := make([]byte, 2048)
	return timeEchoes(ctx, n, size, payload, func(tx []byte, seqAt int, seq uint64, _ time.Time) error {
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
	})
}

// timeEchoes times n round trips of exchange, one at a time: each sends tx
// (payload, then the sequence number seq at seqAt, padded to size) and
// returns once the answer carrying seq is back.
func timeEchoes(ctx context.Context, n, size int, payload []byte, exchange func(tx []byte, seqAt int, seq uint64, t0 time.Time) error) ([]time.Duration, error) {
	size = max(size, len(payload)+8)
	out := make([]time.Duration, 0, n)
	tx := make([]byte, size)
	copy(tx, payload)
	seqAt := len(payload)
	freshHeap()
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		putSeq(tx[seqAt:], uint64(i))
		t0 := time.Now()
		if err := exchange(tx, seqAt, uint64(i), t0); err != nil {
			return nil, fmt.Errorf("e2ebench: echo %d: %w", i, err)
		}
		out = append(out, time.Since(t0))
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

// busyEchoRTTs is echoRTTs between two busy-polling sockets
// (udp.ListenBusyPoll: outside Go's network poller, each end spinning on
// non-blocking receives): the kernel's UDP path with no wake-up on either
// end, the socket kind and polling the bridges use under bench e2e. c
// sends to its peer, s answers to its own.
func busyEchoRTTs(ctx context.Context, c, s *udp.Conn, n, size int, payload []byte) ([]time.Duration, error) {
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
	defer func() { stop.Store(true); <-done }()
	bufs, sizes := [][]byte{make([]byte, 2048)}, []int{0}
	return timeEchoes(ctx, n, size, payload, func(tx []byte, seqAt int, seq uint64, t0 time.Time) error {
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
	})
}
