package udp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/dxpu/dxpu/tlp/encap"
)

// Mux: one UDP socket carries every pair of an agent (dxpu bridge agent): the manager registers one
// bridge endpoint (IP, UDP port) per box or host, and the switch sends
// every pair of that bridge to it. Frames are told apart by the pair ID in
// the dxpu header (bytes 2..4).

// Mux frame buffers: a frame longer than MuxMaxFrame (a jumbo MTU's payload)
// is cut, and the bridge drops it as malformed.
const (
	MuxMaxFrame = 9216
	muxBuffers  = 1024 // shared by all pairs: about 9 MiB
	pairQueue   = 256  // frames a pair may hold unread before the next is dropped
)

// ErrPairOpen is returned by Mux.Open for a pair that has a connection.
var ErrPairOpen = errors.New("pair already has a connection")

// Mux is a UDP socket shared by the bridges of many pairs.
type Mux struct {
	c     *net.UDPConn
	free  chan []byte
	mu    sync.RWMutex
	pairs map[uint32]*MuxConn
	// Unknown counts frames for pairs with no connection; Malformed
	// frames too short or of another version to carry a pair ID;
	// Overflow frames dropped because their pair's queue was full.
	Unknown, Malformed, Overflow atomic.Uint64
}

// ListenMux binds the socket that every pair's frames arrive on.
func ListenMux(local netip.AddrPort) (*Mux, error) {
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(local))
	if err != nil {
		return nil, fmt.Errorf("udp: mux: listen %v: %w", local, err)
	}
	_ = c.SetReadBuffer(8 << 20)
	_ = c.SetWriteBuffer(8 << 20)
	m := &Mux{c: c, free: make(chan []byte, muxBuffers), pairs: map[uint32]*MuxConn{}}
	slab := make([]byte, muxBuffers*MuxMaxFrame)
	for i := range muxBuffers {
		m.free <- slab[i*MuxMaxFrame : (i+1)*MuxMaxFrame : (i+1)*MuxMaxFrame]
	}
	return m, nil
}

// LocalAddr is the bound address.
func (m *Mux) LocalAddr() netip.AddrPort { return m.c.LocalAddr().(*net.UDPAddr).AddrPort() }

// Close closes the socket; Run returns.
func (m *Mux) Close() error { return m.c.Close() }

// Open returns the transport of one pair: frames it sends go to peer,
// frames carrying its pair ID come out of Recv. Close it to give the pair
// ID back.
func (m *Mux) Open(pair uint32, peer netip.AddrPort) (*MuxConn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.pairs[pair]; ok {
		return nil, fmt.Errorf("udp: mux: pair %d: %w", pair, ErrPairOpen)
	}
	pc := &MuxConn{m: m, id: pair, peer: peer, rx: make(chan []byte, pairQueue), done: make(chan struct{})}
	m.pairs[pair] = pc
	return pc, nil
}

// Run reads datagrams and hands each to its pair until the socket is
// closed or ctx ends.
func (m *Mux) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { m.c.Close() })
	defer stop()
	for {
		var buf []byte
		select {
		case buf = <-m.free:
		case <-ctx.Done():
			return ctx.Err()
		}
		n, _, err := m.c.ReadFromUDPAddrPort(buf)
		if err != nil {
			m.free <- buf
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("udp: mux: receive: %w", err)
		}
		m.dispatch(buf[:n])
	}
}

// dispatch queues one frame on its pair, or recycles it.
func (m *Mux) dispatch(frame []byte) {
	if len(frame) < encap.HeaderLen || encap.Header(frame).Version() != encap.Version {
		m.Malformed.Add(1)
		m.free <- frame[:cap(frame)]
		return
	}
	id := encap.Header(frame).PairID()
	// The read lock is held through the hand-over: Close unregisters
	// under the write lock before it drains, so no frame is queued on a
	// closed pair and lost with its buffer.
	m.mu.RLock()
	defer m.mu.RUnlock()
	pc := m.pairs[id]
	if pc == nil {
		m.Unknown.Add(1)
		m.free <- frame[:cap(frame)]
		return
	}
	select {
	case pc.rx <- frame:
	default:
		m.Overflow.Add(1)
		m.free <- frame[:cap(frame)]
	}
}

// MuxConn is one pair's driver.Transport over the shared socket.
type MuxConn struct {
	m     *Mux
	id    uint32
	peer  netip.AddrPort
	rx    chan []byte
	done  chan struct{}
	close sync.Once
}

// Send transmits one frame to the pair's peer (the switch).
func (p *MuxConn) Send(frame []byte) error {
	_, err := p.m.c.WriteToUDPAddrPort(frame, p.peer)
	return err
}

// Recv returns the next frame of this pair.
func (p *MuxConn) Recv(buf []byte) (int, error) {
	select {
	case f := <-p.rx:
		n := copy(buf, f)
		p.m.free <- f[:cap(f)]
		return n, nil
	case <-p.done:
		return 0, net.ErrClosed
	}
}

// Close unregisters the pair (the socket stays open for the others) and
// recycles what it had queued.
func (p *MuxConn) Close() error {
	p.close.Do(func() {
		p.m.mu.Lock()
		if p.m.pairs[p.id] == p {
			delete(p.m.pairs, p.id)
		}
		p.m.mu.Unlock()
		close(p.done)
		for {
			select {
			case f := <-p.rx:
				p.m.free <- f[:cap(f)]
			default:
				return
			}
		}
	})
	return nil
}
