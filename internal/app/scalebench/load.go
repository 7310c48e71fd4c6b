package scalebench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/internal/app/units"
	"github.com/dxpu/dxpu/tlp"
)

// probeTag is the NetTLP tag port of the latency probe on pair 1: the
// readers use tags 0..Readers-1, at most 15.
const probeTag = 15

// pairLoad is one pair's adapter side in this process: Readers clients
// each keeping one read outstanding, and the probe client.
type pairLoad struct {
	readers []*nettlp.Client
	probe   *probe
	bytes   atomic.Uint64
	reads   atomic.Uint64
	errs    atomic.Uint64
	first   atomic.Pointer[string]
}

// dialPair opens pair e's clients where the host sides live.
func dialPair(fab fabric, e endpoints, readers int) (*pairLoad, error) {
	pl := &pairLoad{}
	err := fab.inHost(func() error {
		for tag := range readers {
			c, err := nettlp.Dial(e.load, e.adapter, uint8(tag), tlp.NewID(0, 0, 0))
			if err != nil {
				return err
			}
			c.Timeout = time.Second
			pl.readers = append(pl.readers, c)
		}
		p, err := dialProbe(e)
		if err != nil {
			return err
		}
		pl.probe = p
		return nil
	})
	if err != nil {
		pl.close()
		return nil, fmt.Errorf("scalebench: adapter sockets at %v: %w", e.load, err)
	}
	return pl, nil
}

func (pl *pairLoad) close() {
	for _, c := range pl.readers {
		c.Close()
	}
	if pl.probe != nil {
		pl.probe.Close()
	}
}

// up waits until a 4-byte read crosses the pair, or until deadline or a
// process of the pair exits.
func (pl *pairLoad) up(ctx context.Context, deadline time.Time, procs []*proc) error {
	for {
		err := pl.probe.read()
		if err == nil {
			return nil
		}
		for _, p := range procs {
			if err := p.exited(); err != nil {
				return err
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("scalebench: no read crossed the pair by the deadline: %w", err)
		}
		if !errors.Is(err, nettlp.ErrTimeout) {
			time.Sleep(10 * time.Millisecond) // refused before the pair came up: try again
		}
	}
}

// flood keeps each reader's read outstanding until stop, counting the
// bytes that come back; a failed read (a timeout under load) is counted
// and the reader goes on.
func (pl *pairLoad) flood(wg *sync.WaitGroup, stop *atomic.Bool, size int) {
	for i, c := range pl.readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, size)
			addr := memBase + uint64(i)*uint64(size)
			for !stop.Load() {
				n, err := c.Read(addr, buf)
				if err != nil {
					pl.errs.Add(1)
					s := err.Error()
					pl.first.CompareAndSwap(nil, &s)
					continue
				}
				pl.bytes.Add(uint64(n))
				pl.reads.Add(1)
			}
		}()
	}
}

// echo is a UDP echo in this process on the host side's loopback: the
// baseline the probe's reads are judged against.
type echo struct {
	c, s *net.UDPConn
	tx   [64]byte
	rx   [64]byte
	seq  uint64
}

func newEcho(fab fabric) (*echo, error) {
	e := &echo{}
	err := fab.inHost(func() (err error) {
		lo := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}
		if e.s, err = net.ListenUDP("udp4", lo); err != nil {
			return err
		}
		e.c, err = net.DialUDP("udp4", nil, e.s.LocalAddr().(*net.UDPAddr))
		return err
	})
	if err != nil {
		e.close()
		return nil, fmt.Errorf("scalebench: echo: %w", err)
	}
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := e.s.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			_, _ = e.s.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	return e, nil
}

func (e *echo) close() {
	if e.c != nil {
		e.c.Close()
	}
	if e.s != nil {
		e.s.Close()
	}
}

// once times one round trip; a late answer to an earlier one is skipped.
func (e *echo) once() (time.Duration, error) {
	e.seq++
	putSeq(e.tx[:], e.seq)
	t0 := time.Now()
	if _, err := e.c.Write(e.tx[:]); err != nil {
		return 0, fmt.Errorf("scalebench: echo: %w", err)
	}
	for {
		if err := e.c.SetReadDeadline(t0.Add(time.Second)); err != nil {
			return 0, err
		}
		n, err := e.c.Read(e.rx[:])
		if err != nil {
			return 0, fmt.Errorf("scalebench: echo %d: %w", e.seq, err)
		}
		if n == len(e.tx) && getSeq(e.rx[:]) == e.seq {
			return time.Since(t0), nil
		}
	}
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

// turns times an echo then a 4-byte read on p, at least n times and
// until until passes; a read that fails (a timeout under load) is counted
// as its timeout, so that the tail shows it.
func turns(ctx context.Context, e *echo, p *probe, n int, until time.Time) (mmio, ech []time.Duration, err error) {
	for i := 0; ; i++ {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		if i >= n && !time.Now().Before(until) {
			break
		}
		d, err := e.once()
		if err != nil {
			return nil, nil, err
		}
		ech = append(ech, d)
		t0 := time.Now()
		rerr := p.read()
		d = time.Since(t0)
		if rerr != nil && !errors.Is(rerr, nettlp.ErrTimeout) {
			return nil, nil, fmt.Errorf("scalebench: probe read: %w", rerr)
		}
		mmio = append(mmio, d)
	}
	return mmio, ech, nil
}

// probe times single 4-byte reads on tag port 15 of a pair. Unlike
// nettlp.Client, which takes any completion on its port, it gives each
// read a tag of its own among the 16 that share that port (15, 31, ...
// 255), drops completions left from a read that timed out before it sends,
// and skips any with another tag: a late completion taken for the next
// read's would make every later read look as fast as a queued datagram.
type probe struct {
	c       *net.UDPConn
	n       uint16
	out, in []byte
	drain   func(fd uintptr)
	timeout time.Duration
}

func dialProbe(e endpoints) (*probe, error) {
	port := nettlp.Port(probeTag)
	c, err := net.DialUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(e.load, port)),
		net.UDPAddrFromAddrPort(netip.AddrPortFrom(e.adapter, port)))
	if err != nil {
		return nil, err
	}
	p := &probe{c: c, out: make([]byte, 0, 64), in: make([]byte, nettlp.MaxDatagram), timeout: 200 * time.Millisecond}
	p.drain = func(fd uintptr) {
		for {
			if _, _, err := unix.Recvfrom(int(fd), p.in, unix.MSG_DONTWAIT); err != nil {
				return
			}
		}
	}
	return p, nil
}

func (p *probe) Close() error { return p.c.Close() }

// read reads 4 bytes at memBase and waits for their completion; a read
// unanswered within the timeout returns nettlp.ErrTimeout.
func (p *probe) read() error {
	rc, err := p.c.SyscallConn()
	if err != nil {
		return err
	}
	if err := rc.Control(p.drain); err != nil {
		return err
	}
	p.n = (p.n + 1) % 16
	tag := p.n<<4 | probeTag
	req := tlp.Packet{Kind: tlp.MRd, Addr64: true, Length: 1, Tag: tag, FirstBE: 0xf, Address: memBase}
	out, err := req.AppendTo(append(p.out[:0], make([]byte, nettlp.HeaderLen)...))
	if err != nil {
		return err
	}
	p.out = out
	t0 := time.Now()
	if _, err := p.c.Write(out); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	for {
		if err := p.c.SetReadDeadline(t0.Add(p.timeout)); err != nil {
			return err
		}
		n, err := p.c.Read(p.in)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return units.Errorf("probe: %w: no completion of tag %d within %v", nettlp.ErrTimeout, tag, p.timeout)
		}
		if err != nil {
			return fmt.Errorf("probe: %w", err)
		}
		if n < nettlp.HeaderLen {
			continue
		}
		v, err := tlp.Parse(p.in[nettlp.HeaderLen:n])
		if err != nil || v.Tag() != tag || (v.Kind() != tlp.CplD && v.Kind() != tlp.Cpl) {
			continue
		}
		if v.Kind() != tlp.CplD || v.Status() != tlp.StatusSC {
			return fmt.Errorf("probe: completion of tag %d: %v, status %v", tag, v.Kind(), v.Status())
		}
		return nil
	}
}

// quantileUs is the q-quantile of d in microseconds.
func quantileUs(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[int(q*float64(len(s)-1))]) / 1e3
}
