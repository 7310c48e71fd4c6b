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

// Mux: one UDP socket carries every pair of an agent (dxpu bridge agent):
// the manager registers one bridge endpoint (IP, UDP port) per box or
// host, and the switch sends every pair of that bridge to it. Frames are
// told apart by the pair ID in the dxpu header (bytes 2..4).
//
// On Linux the kernel steers each pair's frames to a socket of the pair's
// own (mux_steer.go), which its runner reads as a bridge reads a socket
// of its own. Otherwise (and for what no pair's socket takes) the socket
// is read in batches (recvmmsg, up to MaxBatch datagrams a call) by Run's
// goroutine, which queues each frame on its pair; a pair's runner takes
// its queue in batches too (MuxConn is a driver.Poller). Either way a
// pair sends in batches (sendmmsg, with UDP segmentation where the kernel
// offers it), as a bridge on a socket of its own does.

// Mux frame buffers: a frame longer than MuxMaxFrame (a jumbo MTU's
// payload) is cut, and the bridge drops it as malformed.
const (
	MuxMaxFrame = 9216
	muxBuffers  = 1024 // shared by all pairs: about 9 MiB
	pairQueue   = 256  // frames a pair may hold unread before the next is dropped
)

// ErrPairOpen is returned by Mux.Open for a pair that has a connection.
var ErrPairOpen = errors.New("pair already has a connection")

// Mux is a UDP socket shared by the bridges of many pairs.
type Mux struct {
	conn  *Conn     // receives from every source; each queued MuxConn sends on its socket
	steer *steering // nil: every pair through the queues (mux_steer.go)
	free  chan []byte
	mu    sync.RWMutex
	pairs map[uint32]*MuxConn
	// Unknown counts frames for pairs with no connection; Malformed
	// frames too short or of another version to carry a pair ID;
	// Overflow frames dropped because their pair's queue was full.
	Unknown, Malformed, Overflow atomic.Uint64
	// recvCalls counts the receive calls that took datagrams (tests).
	recvCalls atomic.Uint64

	closeOnce sync.Once // a Close in progress makes the others wait for it
	closeErr  error
}

// ListenMux binds the socket that every pair's frames arrive on.
// Where the kernel takes it (Linux), each pair then gets a socket of its
// own that the kernel steers its frames to (mux_steer.go).
func ListenMux(local netip.AddrPort) (*Mux, error) { return listenMux(local, true) }

// listenMux is ListenMux, with steering or without (every pair through
// the mux's queues).
func listenMux(local netip.AddrPort, steer bool) (*Mux, error) {
	c, st, err := listenMuxSocket(local, steer)
	if err != nil {
		return nil, fmt.Errorf("udp: mux: %w", err)
	}
	c.anySource = true
	m := &Mux{conn: c, steer: st, free: make(chan []byte, muxBuffers), pairs: map[uint32]*MuxConn{}}
	slab := make([]byte, muxBuffers*MuxMaxFrame)
	for i := range muxBuffers {
		m.free <- slab[i*MuxMaxFrame : (i+1)*MuxMaxFrame : (i+1)*MuxMaxFrame]
	}
	return m, nil
}

// LocalAddr is the bound address.
func (m *Mux) LocalAddr() netip.AddrPort { return m.conn.LocalAddr() }

// Steered reports whether the kernel steers each pair's frames to a
// socket of its own.
func (m *Mux) Steered() bool { return m.steer != nil }

// SteeredPairs is how many open pairs the kernel steers to a socket of
// their own (the others go through the mux's queues).
func (m *Mux) SteeredPairs() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n := 0
	for _, pc := range m.pairs {
		if pc.sock != nil {
			n++
		}
	}
	return n
}

// Close closes the sockets, the pairs' too; Run returns. A Close while
// another is in progress waits for it and returns its error.
func (m *Mux) Close() error {
	m.closeOnce.Do(func() {
		if m.steer != nil {
			m.steer.close()
		}
		m.closeErr = m.conn.Close()
	})
	return m.closeErr
}

// Open returns the transport of one pair: frames it sends go to peer,
// frames carrying its pair ID come out of its receive calls. Close it to
// give the pair ID back.
func (m *Mux) Open(pair uint32, peer netip.AddrPort) (*MuxConn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.pairs[pair]; ok {
		return nil, fmt.Errorf("udp: mux: pair %d: %w", pair, ErrPairOpen)
	}
	pc := &MuxConn{m: m, id: pair, notify: make(chan struct{}, 1), done: make(chan struct{})}
	if m.steer != nil {
		// A pair the kernel cannot steer (past maxSteered, or its socket
		// refused) goes through the queues.
		if c, err := m.steer.open(pair, peer); err == nil {
			pc.sock, pc.tx = c, c
		}
	}
	if pc.tx == nil {
		pc.tx = &Conn{c: m.conn.c, peer: peer}
		if err := pc.tx.sys.init(m.conn.c); err != nil {
			return nil, fmt.Errorf("udp: mux: pair %d: %w", pair, err)
		}
		pc.tx.SetPeer(peer)
	}
	m.pairs[pair] = pc
	return pc, nil
}

// Run reads datagrams, a batch per system call, and queues each on its
// pair until the socket is closed or ctx ends.
func (m *Mux) Run(ctx context.Context) error {
	// On ctx's end the sockets close, the pairs' too, before Run returns:
	// the port is free again for an agent restarted on it.
	stop := context.AfterFunc(ctx, func() { m.Close() })
	defer func() {
		if !stop() {
			m.Close() // waits for the AfterFunc's Close
		}
	}()
	bufs := make([][]byte, 0, MaxBatch)
	sizes := make([]int, MaxBatch)
	defer func() {
		for _, b := range bufs {
			m.free <- b
		}
	}()
	for {
		// Buffers for the next call: one at least (waiting for it while
		// every buffer is queued on a pair), then as many as are free.
		if len(bufs) == 0 {
			select {
			case b := <-m.free:
				bufs = append(bufs, b)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	fill:
		for len(bufs) < MaxBatch {
			select {
			case b := <-m.free:
				bufs = append(bufs, b)
			default:
				break fill
			}
		}
		n, err := m.conn.RecvBatch(bufs, sizes)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("udp: mux: %w", err)
		}
		m.recvCalls.Add(1)
		m.dispatch(bufs[:n], sizes[:n])
		// The buffers the call did not fill wait for the next one.
		k := copy(bufs, bufs[n:])
		clear(bufs[k:])
		bufs = bufs[:k]
	}
}

// dispatch queues each frame (bufs[i][:sizes[i]]) on its pair, or
// recycles it, and wakes each pair that got frames once.
func (m *Mux) dispatch(bufs [][]byte, sizes []int) {
	// The read lock is held through the hand-over: Close unregisters
	// under the write lock before it drains, so no frame is queued on a
	// closed pair and lost with its buffer.
	m.mu.RLock()
	defer m.mu.RUnlock()
	var last *MuxConn // frames of one pair come in runs: wake it once per run
	for i, b := range bufs {
		frame := b[:sizes[i]]
		if len(frame) < encap.HeaderLen || encap.Header(frame).Version() != encap.Version {
			m.Malformed.Add(1)
			m.free <- b
			continue
		}
		pc := m.pairs[encap.Header(frame).PairID()]
		if pc == nil || pc.sock != nil { // a steered pair's come to its socket
			m.Unknown.Add(1)
			m.free <- b
			continue
		}
		if !pc.queue(frame) {
			m.Overflow.Add(1)
			m.free <- b
			continue
		}
		if last != nil && last != pc {
			last.wake()
		}
		last = pc
	}
	if last != nil {
		last.wake()
	}
}

// MuxConn is one pair's transport over the shared socket: a
// driver.Transport, BatchSender, BatchReceiver and Poller.
type MuxConn struct {
	m  *Mux
	id uint32
	tx *Conn // sends to peer: on sock, or on the mux's socket (never closed by the pair)
	// sock, when the kernel steers the pair's frames: its own socket in
	// the mux's group, which it receives on instead of its queue. life
	// orders Close after the receive calls in progress (read-locked), so
	// that the socket is free for the next pair once Close returns.
	sock   *Conn
	life   sync.RWMutex
	closed atomic.Bool

	mu     sync.Mutex // the queue
	q      [pairQueue][]byte
	head   int
	n      int
	notify chan struct{} // a frame was queued (capacity 1)
	done   chan struct{}
	close  sync.Once

	rxMu sync.Mutex // one receiver at a time; take's scratch
	took [MaxBatch][]byte
}

// queue appends a frame; false when the queue is full. Called by the
// mux under its read lock.
func (p *MuxConn) queue(frame []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == pairQueue {
		return false
	}
	p.q[(p.head+p.n)%pairQueue] = frame
	p.n++
	return true
}

func (p *MuxConn) wake() {
	select {
	case p.notify <- struct{}{}:
	default:
	}
}

// Send transmits one frame to the pair's peer (the switch).
func (p *MuxConn) Send(frame []byte) error {
	if err := p.tx.Send(frame); err != nil {
		return fmt.Errorf("udp: mux: pair %d: send: %w", p.id, err)
	}
	return nil
}

// SendBatch transmits frames to the pair's peer in order, a batch per
// system call, and returns how many went out.
func (p *MuxConn) SendBatch(frames [][]byte) (int, error) { return p.tx.SendBatch(frames) }

// take moves up to len(bufs) queued frames into bufs (lengths in sizes)
// and recycles their buffers; it returns how many it took, and
// net.ErrClosed once the pair is closed. Called with rxMu held.
func (p *MuxConn) take(bufs [][]byte, sizes []int) (int, error) {
	select {
	case <-p.done:
		return 0, fmt.Errorf("udp: mux: pair %d: %w", p.id, net.ErrClosed)
	default:
	}
	bufs = bufs[:min(len(bufs), len(p.took))]
	p.mu.Lock()
	k := min(p.n, len(bufs))
	for i := range k {
		j := (p.head + i) % pairQueue
		p.took[i], p.q[j] = p.q[j], nil
	}
	p.head, p.n = (p.head+k)%pairQueue, p.n-k
	p.mu.Unlock()
	// Copied outside the queue's lock: the mux goes on queueing.
	for i, f := range p.took[:k] {
		sizes[i] = copy(bufs[i], f)
		p.m.free <- f[:cap(f)]
		p.took[i] = nil
	}
	return k, nil
}

// TryRecvBatch takes the frames already queued, up to len(bufs), and
// returns 0 at once when there are none or another goroutine is
// receiving.
func (p *MuxConn) TryRecvBatch(bufs [][]byte, sizes []int) (int, error) {
	if len(sizes) < len(bufs) {
		return 0, fmt.Errorf("udp: mux: receive: %d sizes for %d buffers", len(sizes), len(bufs))
	}
	if p.sock != nil {
		p.life.RLock()
		defer p.life.RUnlock()
		if p.closed.Load() {
			return 0, p.errClosed()
		}
		return p.sock.steeredTry(bufs, sizes)
	}
	if !p.rxMu.TryLock() {
		return 0, nil
	}
	defer p.rxMu.Unlock()
	return p.take(bufs, sizes)
}

// Steered reports whether the kernel steers the pair's frames to a socket
// of its own (else they come through the mux's queues).
func (p *MuxConn) Steered() bool { return p.sock != nil }

func (p *MuxConn) errClosed() error { return fmt.Errorf("udp: mux: pair %d: %w", p.id, net.ErrClosed) }

// WaitReadable blocks until a frame is queued or the pair is closed; it
// takes nothing. Call it from one goroutine at a time.
func (p *MuxConn) WaitReadable() error {
	if p.sock != nil {
		p.life.RLock()
		defer p.life.RUnlock()
		if p.closed.Load() {
			return p.errClosed()
		}
		err := p.sock.steeredWait()
		if p.closed.Load() {
			return p.errClosed() // Close ended the wait
		}
		return err
	}
	for {
		p.mu.Lock()
		n := p.n
		p.mu.Unlock()
		if n > 0 {
			return nil
		}
		select {
		case <-p.notify:
		case <-p.done:
			return fmt.Errorf("udp: mux: pair %d: %w", p.id, net.ErrClosed)
		}
	}
}

// RecvBatch blocks until a frame is queued, then takes the queued ones,
// up to len(bufs).
func (p *MuxConn) RecvBatch(bufs [][]byte, sizes []int) (int, error) {
	if len(sizes) < len(bufs) || len(bufs) == 0 {
		return 0, fmt.Errorf("udp: mux: receive: %d sizes for %d buffers", len(sizes), len(bufs))
	}
	if p.sock != nil {
		for {
			if k, err := p.TryRecvBatch(bufs, sizes); k > 0 || err != nil {
				return k, err
			}
			if err := p.WaitReadable(); err != nil {
				return 0, err
			}
		}
	}
	p.rxMu.Lock()
	defer p.rxMu.Unlock()
	for {
		if k, err := p.take(bufs, sizes); k > 0 || err != nil {
			return k, err
		}
		if err := p.WaitReadable(); err != nil {
			return 0, err
		}
	}
}

// Recv returns the next frame of this pair.
func (p *MuxConn) Recv(buf []byte) (int, error) {
	bufs, sizes := [1][]byte{buf}, [1]int{}
	if _, err := p.RecvBatch(bufs[:], sizes[:]); err != nil {
		return 0, err
	}
	return sizes[0], nil
}

// Close unregisters the pair (the socket stays open for the others) and
// recycles what it had queued.
func (p *MuxConn) Close() error {
	p.close.Do(func() {
		if p.sock != nil {
			// End a wait in progress, then wait for the receive calls
			// to return before the socket goes to the next pair.
			p.closed.Store(true)
			p.sock.unblock()
			p.life.Lock()
			defer p.life.Unlock()
		}
		p.m.mu.Lock()
		if p.m.pairs[p.id] == p {
			delete(p.m.pairs, p.id)
		}
		p.m.mu.Unlock()
		if p.sock != nil {
			p.m.steer.release(p.id)
		}
		close(p.done)
		p.mu.Lock()
		defer p.mu.Unlock()
		for ; p.n > 0; p.n-- {
			f := p.q[p.head]
			p.q[p.head] = nil
			p.head = (p.head + 1) % pairQueue
			p.m.free <- f[:cap(f)]
		}
	})
	return nil
}
