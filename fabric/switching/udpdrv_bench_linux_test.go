package switching_test

import (
	"fmt"
	"net"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/tlp/encap"
)

// mmsgConn sends or receives up to mmsgBench datagrams per system call on
// a connected or bound UDP socket, without allocating: the benchmark's
// source and sink, so that they cost little beside the driver.
type mmsgConn struct {
	rc   syscall.RawConn
	hdrs [mmsgBench]unix.Mmsghdr
	iov  [mmsgBench]unix.Iovec
	trap uintptr
	n    int
	done int
	err  error
	fn   func(fd uintptr) bool
}

const mmsgBench = 64

func newMmsgConn(tb testing.TB, c *net.UDPConn, trap uintptr, bufs [][]byte) *mmsgConn {
	rc, err := c.SyscallConn()
	if err != nil {
		tb.Fatal(err)
	}
	m := &mmsgConn{rc: rc, trap: trap}
	for i := range m.hdrs {
		b := bufs[i%len(bufs)]
		m.iov[i].Base = &b[0]
		m.iov[i].SetLen(len(b))
		m.hdrs[i].Hdr.Iov = &m.iov[i]
		m.hdrs[i].Hdr.SetIovlen(1)
	}
	m.fn = func(fd uintptr) bool {
		for {
			r, _, e := unix.Syscall6(m.trap, fd, uintptr(unsafe.Pointer(&m.hdrs[0])), uintptr(m.n), 0, 0, 0)
			switch e {
			case 0:
				m.done, m.err = int(r), nil
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				return false
			default:
				m.done, m.err = 0, e
			}
			return true
		}
	}
	return m
}

// send sends the first n (at most mmsgBench) datagrams; recv takes up to
// n. Both return how many went.
func (m *mmsgConn) send(n int) (int, error) {
	m.n = min(n, mmsgBench)
	if err := m.rc.Write(m.fn); err != nil {
		return 0, err
	}
	return m.done, m.err
}

func (m *mmsgConn) recv(n int) (int, error) {
	m.n = min(n, mmsgBench)
	if err := m.rc.Read(m.fn); err != nil {
		return 0, err
	}
	return m.done, m.err
}

// cpuTime returns the CPU time this process used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkUDPRelay relays a stream of datagrams from one source socket to
// one destination socket through the UDP driver on loopback: "batched" as
// it ships (recvmmsg, sendmmsg), "perdatagram" with the portable loop (a
// system call per datagram each way, as before); "direct" sends from the
// source to the destination without the switch, the cost of the rig. The
// source and sink move 64 datagrams per system call and keep at most
// `window` in flight, so that nothing is lost. ns/op and cpu-ns/op (the
// whole process: source, driver and sink, user and system) are per
// datagram; the driver's share is cpu-ns/op less direct's.
func BenchmarkUDPRelay(b *testing.B) {
	for _, size := range []int{1472, 256} {
		for _, mode := range []string{"direct", "perdatagram", "batched"} {
			b.Run(fmt.Sprintf("%dB/%s", size, mode), func(b *testing.B) { benchRelay(b, size, mode) })
		}
	}
}

func benchRelay(b *testing.B, size int, mode string) {
	perDatagram := mode == "perdatagram"
	const window = 256
	r := newUDPRig(b, "127.0.0.1:0", perDatagram, 1, nil)
	if mode != "direct" {
		r.start()
	}
	// src takes the pair's host end's address, connected to the switch
	// (direct: to the destination).
	ha := r.hosts[0].LocalAddr().(*net.UDPAddr)
	r.hosts[0].Close()
	to := r.sw
	if mode == "direct" {
		to = r.gpus[0].LocalAddr().(*net.UDPAddr)
	}
	src, err := net.DialUDP("udp4", ha, to)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	msg := testDatagram(encap.MsgTLP, pairID(0), 0, 1, size)
	tx := newMmsgConn(b, src, unix.SYS_SENDMMSG, [][]byte{msg})
	sinkBufs := make([][]byte, mmsgBench)
	for i := range sinkBufs {
		sinkBufs[i] = make([]byte, 2048)
	}
	rx := newMmsgConn(b, r.gpus[0], unix.SYS_RECVMMSG, sinkBufs)

	// One datagram through first: the driver has made its buffers, the
	// poller knows the sockets.
	if _, err := tx.send(1); err != nil {
		b.Fatal(err)
	}
	if _, err := rx.recv(1); err != nil {
		b.Fatal(err)
	}
	var got atomic.Int64
	progress := make(chan struct{}, 1)
	sinkErr := make(chan error, 1)
	go func() {
		for {
			n, err := rx.recv(mmsgBench)
			if err != nil {
				sinkErr <- err
				return
			}
			got.Add(int64(n))
			select {
			case progress <- struct{}{}:
			default:
			}
		}
	}()
	stall := time.NewTimer(time.Hour)
	defer stall.Stop()
	var ms0, ms1 runtime.MemStats
	b.SetBytes(int64(size))
	b.ReportAllocs()
	runtime.ReadMemStats(&ms0)
	b.ResetTimer()
	cpu0 := cpuTime()
	sent := 0
	for sent < b.N || got.Load() < int64(b.N) {
		if room := window - (sent - int(got.Load())); sent < b.N && room >= mmsgBench/2 {
			n, err := tx.send(min(room, b.N-sent))
			if err != nil {
				b.Fatalf("sending: %v", err)
			}
			sent += n
			continue
		}
		stall.Reset(5 * time.Second)
		select {
		case <-progress:
		case err := <-sinkErr:
			b.Fatalf("sink: %v", err)
		case <-stall.C:
			b.Fatalf("no progress for 5s: %d sent, %d arrived (lost on loopback?)", sent, got.Load())
		}
	}
	b.StopTimer()
	cpu := cpuTime() - cpu0
	runtime.ReadMemStats(&ms1)
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(b.N), "mallocs/op")
	r.drv.Close()
	r.stop(b)
	if mode != "direct" {
		b.ReportMetric(float64(b.N)/float64(max(1, switching.UDPReceives(r.drv))), "dgrams/recv")
	}
}
