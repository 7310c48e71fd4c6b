package e2ebench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
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
	size = max(size, len(payload)+8)
	out := make([]time.Duration, 0, n)
	tx, rx := make([]byte, size), make([]byte, 2048)
	copy(tx, payload)
	seqAt := len(payload)
	freshHeap()
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		putSeq(tx[seqAt:], uint64(i))
		t0 := time.Now()
		if _, err := c.WriteToUDPAddrPort(tx, peer); err != nil {
			return nil, fmt.Errorf("e2ebench: echo %d to %v: %w", i, peer, err)
		}
		for {
			if err := c.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
				return nil, fmt.Errorf("e2ebench: echo deadline: %w", err)
			}
			m, _, err := c.ReadFromUDPAddrPort(rx)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return nil, fmt.Errorf("e2ebench: echo %d: no answer from %v within 1s", i, peer)
			}
			if err != nil {
				return nil, fmt.Errorf("e2ebench: echo %d: %w", i, err)
			}
			if m == size && getSeq(rx[seqAt:]) == uint64(i) {
				break
			}
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
