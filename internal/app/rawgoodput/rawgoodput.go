// Package rawgoodput measures what the network under a bridge pair carries
// with no bridge at all, as the baseline of a pair's goodput in the same
// run: two plain UDP sockets flooded with datagrams of the pair's size
// (sendmmsg and recvmmsg, as the bridges send and receive, but a datagram
// per message: no UDP segmentation offload), and on
// loopback one TCP connection. `dxpu bench link` and `dxpu bench e2e`
// report them beside the pair.
package rawgoodput

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/bridge/udp"
	"github.com/dxpu/dxpu/internal/app/units"
)

// UDPResult is a UDP flood: Gbit/s of datagram payload (the UDP payload,
// prefix included) received, and the datagrams sent and received (the
// difference is what the receiver's socket dropped: nothing paces the
// sender).
type UDPResult struct {
	GoodputGbps   float64 `json:"goodput_gbps"`
	DatagramBytes int     `json:"datagram_bytes"`
	Sent          uint64  `json:"datagrams_sent"`
	Received      uint64  `json:"datagrams_received"`
	// CPUSecondsPerGB is the process's CPU time (user and system, sender
	// and receiver) per GB received.
	CPUSecondsPerGB float64 `json:"cpu_s_per_gb,omitempty"`
}

// CPUTime returns the CPU time (user and system) the process used so far.
func CPUTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// UDP floods rx from tx with datagrams of size bytes that start with
// prefix (a dxpu header, so that a switch forwards them) for d, in
// batches of udp.MaxBatch, and returns what rx received per second. It
// owns both sockets and closes them. Both send and receive every datagram
// on its own (udp.Conn.NoOffload): a plain socket's figure, where the
// bridges segment and coalesce runs of equal frames.
func UDP(ctx context.Context, tx, rx *udp.Conn, size int, prefix []byte, d time.Duration) (UDPResult, error) {
	defer tx.Close()
	defer rx.Close()
	tx.NoOffload()
	rx.NoOffload()
	if size < len(prefix) || size < 1 || size > 65507 {
		return UDPResult{}, fmt.Errorf("rawgoodput: datagram size %d: want %d..65507 bytes", size, max(len(prefix), 1))
	}
	if d <= 0 {
		return UDPResult{}, units.Errorf("rawgoodput: duration %v: must be positive", d)
	}
	var got, gotBytes atomic.Uint64
	var wg sync.WaitGroup
	rxErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		bufs, sizes := make([][]byte, udp.MaxBatch), make([]int, udp.MaxBatch)
		for i := range bufs {
			bufs[i] = make([]byte, size)
		}
		for {
			n, err := rx.RecvBatch(bufs, sizes)
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					rxErr <- err
				}
				return
			}
			var b uint64
			for _, s := range sizes[:n] {
				b += uint64(s)
			}
			got.Add(uint64(n))
			gotBytes.Add(b)
		}
	}()
	frames := make([][]byte, udp.MaxBatch)
	for i := range frames {
		frames[i] = make([]byte, size)
		copy(frames[i], prefix)
	}
	var sent uint64
	send := func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := tx.SendBatch(frames)
		sent += uint64(n)
		// A full queue on the way (ENOBUFS) is the flood's own loss, not
		// a failure.
		if errors.Is(err, errNoBufs) {
			return nil
		}
		return err
	}
	// Warm up: the window opens once the receiver has taken a datagram.
	// Timed from the first send, a receiver not yet scheduled (a loaded
	// machine) lost the window's start, or all of a short one.
	var err error
	for w0 := time.Now(); got.Load() == 0 && err == nil; {
		if time.Since(w0) > warmUp {
			return UDPResult{}, units.Errorf("rawgoodput: UDP flood: none of %d datagrams of %d bytes arrived in %v of warm-up", sent, size, warmUp)
		}
		err = send()
	}
	b0, n0 := gotBytes.Load(), got.Load()
	t0, cpu0 := time.Now(), CPUTime()
	var el time.Duration
	for first := true; err == nil && (first || el < d); first = false { // a batch at least
		err = send()
		el = time.Since(t0)
	}
	// What the window sent may still wait in the receiver's socket for a
	// receiver off the CPU: wait for its first datagram (as long as the
	// warm-up may take) rather than call the window empty.
	for w0 := time.Now(); got.Load() == n0 && err == nil && time.Since(w0) < warmUp; {
		time.Sleep(100 * time.Microsecond)
	}
	b1, n1 := gotBytes.Load(), got.Load()
	cpu := CPUTime() - cpu0
	tx.Close()
	rx.Close()
	wg.Wait()
	if err == nil {
		select {
		case err = <-rxErr:
		default:
		}
	}
	if err != nil {
		return UDPResult{}, fmt.Errorf("rawgoodput: UDP flood: %w", err)
	}
	if n1 == n0 {
		return UDPResult{}, units.Errorf("rawgoodput: UDP flood: none of %d datagrams of %d bytes arrived in %v", sent, size, d)
	}
	return UDPResult{GoodputGbps: float64(b1-b0) * 8 / el.Seconds() / 1e9, DatagramBytes: size, Sent: sent, Received: n1 - n0,
		CPUSecondsPerGB: cpu.Seconds() / (float64(b1-b0) / 1e9)}, nil
}

// warmUp bounds how long a UDP flood sends before the receiver has taken
// its first datagram; the measured window opens then (a variable for
// tests).
var warmUp = 2 * time.Second

// errNoBufs is a full queue on the way out of a sender.
var errNoBufs = syscall.ENOBUFS

// TCPChunk is the size of each write and read of the TCP flood.
const TCPChunk = 256 << 10

// TCPLoopback streams over one TCP connection on 127.0.0.1 for d, in
// writes and reads of TCPChunk, and returns the Gbit/s read.
func TCPLoopback(ctx context.Context, d time.Duration) (float64, error) {
	if d <= 0 {
		return 0, units.Errorf("rawgoodput: duration %v: must be positive", d)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("rawgoodput: TCP listen: %w", err)
	}
	defer ln.Close()
	type accepted struct {
		c   net.Conn
		err error
	}
	acc := make(chan accepted, 1)
	go func() {
		c, err := ln.Accept()
		acc <- accepted{c, err}
	}()
	w, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		return 0, fmt.Errorf("rawgoodput: TCP dial: %w", err)
	}
	defer w.Close()
	a := <-acc
	if a.err != nil {
		return 0, fmt.Errorf("rawgoodput: TCP accept: %w", a.err)
	}
	r := a.c
	defer r.Close()
	var read atomic.Uint64
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, TCPChunk)
		for {
			n, err := r.Read(buf)
			read.Add(uint64(n))
			if err != nil {
				if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
					err = nil
				}
				done <- err
				return
			}
		}
	}()
	buf := make([]byte, TCPChunk)
	b0 := read.Load()
	t0 := time.Now()
	var el time.Duration
	for el = time.Since(t0); el < d; el = time.Since(t0) {
		if err = ctx.Err(); err != nil {
			break
		}
		if _, err = w.Write(buf); err != nil {
			break
		}
	}
	b1 := read.Load()
	w.Close()
	if rerr := <-done; err == nil {
		err = rerr
	}
	if err != nil {
		return 0, fmt.Errorf("rawgoodput: TCP stream: %w", err)
	}
	return float64(b1-b0) * 8 / el.Seconds() / 1e9, nil
}
