// Package driver runs a sans-I/O bridge on real time: a Transport (UDP,
// AF_PACKET, or an in-memory link) carries frames, a timer serves the
// bridge's deadline, and the local PCIe side hands TLPs in with Send and
// gets TLPs and events through callbacks.
//
// Everything that touches the bridge holds one mutex; callbacks run with it
// held and must not call back into the Runner (queue work for another
// goroutine instead).
//
// The hot path is batched: a transport that also implements BatchReceiver
// hands the runner up to 8 queued frames at once (recvmmsg on UDP), which
// it feeds to the bridge under one lock with one clock reading before one
// flush; a flush delivers TLPs first (so the acknowledgement that follows
// carries the credits they freed), then drains every frame the bridge has
// to send into reusable buffers and hands them to a BatchSender in one call
// (sendmmsg). Over a SegmentPoller (UDP with GRO) a received message may
// hold a run of frames, each handed to the bridge as a slice of the
// receive buffer. Nothing on this path allocates. Larger receive batches (32)
// measured no faster: they delay acknowledgements, and a credit-bound
// sender waits longer.
//
// Busy polling: over a Poller transport (UDP on Linux) a loop that spins
// anyway, such as package realtime's Clock waiting for its next event,
// calls Poll to take frames on its own goroutine; until it calls PollIdle
// the runner's goroutine leaves the socket alone, so a frame costs no
// goroutine wake-up and no second processor, and the polls serve the
// bridge's deadline instead of a Go timer (re-armed at every flush, it
// cost a few hundred nanoseconds of each round trip). Frames reach the
// bridge in the order they were queued whoever takes them.
//
// Held sends: with HoldSends set, what a Poll and a batching
// QueuedSender's Flush hand the bridge is not framed at once: the loop
// that polls calls SendHeld once it has run what the frames brought, and
// the bridge then packs everything of the turn (TLPs in as few frames as
// the MTU allows, the acknowledgement and credits riding on them) into
// one sendmmsg. Framing at each call sent a bare ACK for every polled
// batch and a part-filled frame for every moment of the simulation, each
// in a system call of its own.
package driver

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/tlp"
)

// Transport carries dxpu frames (from the dxpu header on) to the peer.
type Transport interface {
	// Send transmits one frame; the slice is not kept.
	Send(frame []byte) error
	// Recv blocks for the next frame from the peer and returns its length.
	Recv(buf []byte) (int, error)
	// Close unblocks Recv and releases the transport.
	Close() error
}

// BatchSender is a Transport that sends several frames in one call.
type BatchSender interface {
	// SendBatch transmits frames in order and returns how many went out;
	// on an error, frames[n] failed and the ones after it were not tried.
	// The slices are not kept.
	SendBatch(frames [][]byte) (n int, err error)
}

// BatchReceiver is a Transport that receives several frames in one call.
type BatchReceiver interface {
	// RecvBatch blocks for at least one frame, then takes the frames
	// already queued, up to len(bufs), into bufs and their lengths into
	// sizes, and returns how many it took.
	RecvBatch(bufs [][]byte, sizes []int) (int, error)
}

// Poller is a Transport whose queued frames any goroutine can take
// without blocking, while the runner's own goroutine waits for more: a
// busy-polling loop (package realtime's Clock) calls Runner.Poll and
// handles a frame on its own goroutine, without the wake-up of another.
type Poller interface {
	// TryRecvBatch takes the frames already queued, like RecvBatch, and
	// returns 0 at once when there are none.
	TryRecvBatch(bufs [][]byte, sizes []int) (int, error)
	// WaitReadable blocks until a frame is queued or the transport is
	// closed; it takes nothing.
	WaitReadable() error
}

// SegmentPoller is a Poller that can take a run of frames the network
// coalesced (UDP GRO) as one message, cut apart where it lies: the runner
// hands the bridge each frame as a slice of the receive buffer, so a run
// costs one message through the stack and no copy.
type SegmentPoller interface {
	// EnableGRO turns coalescing on and reports whether it is; from
	// then on the runner receives with TryRecvSegments only.
	EnableGRO() bool
	// TryRecvSegments is TryRecvBatch where bufs[i][:sizes[i]] holds
	// frames of segs[i] bytes each, the last possibly shorter.
	TryRecvSegments(bufs [][]byte, sizes, segs []int) (int, error)
}

// ForeignCounter is a Transport that drops, and counts, what arrives from
// a source other than its peer (the Conns of bridge/udp, bridge/afpacket
// and bridge/afxdp): those never reach the bridge, so Runner.Counters
// reports them as DroppedForeignSource.
type ForeignCounter interface {
	// ForeignDropped returns how many it dropped; any goroutine may call
	// it.
	ForeignDropped() uint64
}

// Batch sizes: frames per flush handed to a BatchSender (fewer when the
// MTU is large, to keep the buffers near 1 MiB), and frames per receive.
const (
	maxTxBatch = 64
	txBatchMem = 1 << 20
	rxBatch    = 8
	rxBufSize  = 65536 // a peer may send frames up to the UDP limit
)

// ErrClosed is returned by Send after Run returned.
var ErrClosed = errors.New("driver: runner stopped")

// Runner drives one bridge.
type Runner struct {
	// OnTLP receives TLPs for the local PCIe side; the View is valid during
	// the call only. Credits are released when it returns unless
	// ManualRelease is set.
	OnTLP func(tlp.View)
	// OnEvent receives the bridge's events.
	OnEvent func(bridge.Event)
	// ManualRelease: the PCIe side calls Release itself.
	ManualRelease bool
	// Accept selects the classes OnTLP takes (default all).
	Accept bridge.ClassMask
	// OnPolledTLP, when set, receives in place of OnTLP the TLPs that
	// frames taken by Poll carry, on Poll's goroutine, with the runner
	// locked like OnTLP: a polling loop that runs the consumer (package
	// realtime's Clock, with the world held) hands them to it directly
	// instead of queueing a copy for itself. It must not call back into
	// the runner.
	OnPolledTLP func(tlp.View)
	// OnDelivered, when set, is called after a run of TLPs went to
	// OnTLP or OnPolledTLP, with the runner locked like them and before
	// the runner frames or sleeps: a PCIe side that queues what OnTLP
	// gave it (a batch of datagrams) sends it here, so nothing waits
	// past the batch that brought it. It must not call back into the
	// runner.
	OnDelivered func()
	// Spin is how long Run polls the transport after the last frames it
	// took before it sleeps until one is readable (over a Poller: UDP,
	// AF_PACKET and AF_XDP on Linux; 0: sleep at once). A frame that arrives while it
	// spins is taken without a wake-up, which on a busy pair costs more
	// than the polls: the bridge of a box with a core per pair. It yields
	// between polls, so the process's other goroutines still run. Set it
	// before Run.
	Spin time.Duration
	// OnLate, when set, is called when the runner's timer ran LateAfter
	// or more past its deadline, with how late, the runner locked: the
	// process was not scheduled (or the lock was held), so the bridge's
	// frames left that much late and its peer may have seen silence. It
	// must not call back into the runner.
	OnLate func(late time.Duration)
	// OnFrameDropped, when set, hears each received frame the bridge
	// dropped, with the runner's clock and why (what FrameError keeps the
	// latest of), the runner locked: a recorder of a pair's history. It
	// must not call back into the runner.
	OnFrameDropped func(now time.Duration, err error)
	// HoldSends: Poll, and SendMany from a QueuedSender with Batch
	// set, leave framing and sending to the next SendHeld (see the
	// package doc). The loop that calls them must call SendHeld before
	// it stops or sleeps. Set it before Run.
	HoldSends bool

	mu      sync.Mutex
	b       *bridge.Bridge
	t       Transport
	start   time.Time
	bs      BatchSender // t as a BatchSender, or nil
	tx      [][]byte    // MTU-sized frame buffers of one flush
	txFrame [][]byte    // the frames in them, as sent
	txN     int
	// held: a call under HoldSends left work for SendHeld; read
	// without mu so that a turn with nothing held skips the lock.
	held    atomic.Bool
	timer   *time.Timer
	timerAt time.Duration
	// fireAt is when the armed timer is due: its deadline, or the time
	// it was armed for one already past.
	fireAt time.Duration
	late   Lateness
	// caughtUp counts frames taken after a stall ahead of the deadline
	// (catchup.go).
	caughtUp uint64
	closed   bool
	// sendErrors counts frames the transport failed to send.
	sendErrors uint64
	// lastFrameError is the latest reason the bridge dropped a frame.
	lastFrameError error
	// rxMu serialises receiving and handling, so that frames reach the
	// bridge in the order the transport queued them whoever takes them
	// (Run's goroutine or a Poll); it is taken before mu.
	rxMu    sync.Mutex
	poller  Poller // t as a Poller, or nil
	rxBufs  [][]byte
	rxSizes []int
	live    atomic.Bool // Run is running: Poll may take frames
	polled  atomic.Uint64
	// peerPayload is the bridge's PeerMaxPayload at the last flush.
	peerPayload atomic.Int32
	// polling: the flush under way is Poll's (guarded by mu).
	polling bool
	// delivering: OnTLP, OnPolledTLP or OnDelivered is running (guarded
	// by mu): Reply may be called.
	delivering bool
	// busyPoll: a loop is polling (Poll since the last PollIdle), so
	// Run's goroutine leaves the socket to it and waits on resume.
	busyPoll atomic.Bool
	resume   chan struct{}
	// seg is poller as a SegmentPoller with GRO on, or nil; rxSegs its
	// segment sizes.
	seg    SegmentPoller
	rxSegs []int

	// Progress is signalled (non-blocking) whenever the bridge accepted
	// acknowledgements or credits, so a producer that got ErrBusy can
	// retry.
	Progress chan struct{}
}

// New returns a runner for b over t. Call Run to start it.
func New(b *bridge.Bridge, t Transport) *Runner {
	r := &Runner{b: b, t: t, start: time.Now(), Accept: bridge.AcceptAll, Progress: make(chan struct{}, 1), resume: make(chan struct{}, 1)}
	// A keyed bridge numbers its handshake frames by wall clock, so that a
	// restarted bridge's HELLOs number above its previous life's.
	b.SetWallClock(r.start)
	mtu := b.Config().MTU
	n := 1
	if bs, ok := t.(BatchSender); ok {
		r.bs = bs
		n = min(max(txBatchMem/mtu, 1), maxTxBatch)
	}
	if p, ok := t.(Poller); ok {
		r.poller = p
		if sp, ok := t.(SegmentPoller); ok && sp.EnableGRO() {
			r.seg = sp
		}
	}
	slab := make([]byte, n*mtu)
	r.tx, r.txFrame = make([][]byte, n), make([][]byte, n)
	for i := range r.tx {
		r.tx[i] = slab[i*mtu : (i+1)*mtu : (i+1)*mtu]
	}
	return r
}

// Now returns the runner's clock: time since New.
func (r *Runner) Now() time.Duration { return time.Since(r.start) }

// Counters returns a copy of the bridge's counters, taken under the
// runner's lock (the bridge itself is not exposed: it is not safe to touch
// from another goroutine), with DroppedForeignSource from a transport
// that is a ForeignCounter.
func (r *Runner) Counters() bridge.Counters {
	r.mu.Lock()
	c := r.b.Counters()
	r.mu.Unlock()
	if fc, ok := r.t.(ForeignCounter); ok {
		c.DroppedForeignSource = fc.ForeignDropped()
	}
	return c
}

// FrameError returns the latest reason a received frame was dropped, or
// nil.
func (r *Runner) FrameError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastFrameError
}

// SendErrors returns how many frames the transport failed to send.
func (r *Runner) SendErrors() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sendErrors
}

// State returns the bridge's link state.
func (r *Runner) State() bridge.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.b.State()
}

// PeerMaxPayload returns the largest TLP payload the peer takes, 0 while
// no peer is known (bridge.Bridge.PeerMaxPayload), as of the runner's last
// flush: before it delivered any TLP it hands on. It takes no lock: a
// PCIe side asks it per request.
func (r *Runner) PeerMaxPayload() int { return int(r.peerPayload.Load()) }

// Pending returns the TLPs the bridge holds unacknowledged.
func (r *Runner) Pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.b.Pending()
}

// Send hands a TLP from the local PCIe side to the bridge (see
// Bridge.HandleTLP for ErrBusy and ErrNotUp).
func (r *Runner) Send(t []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	now := r.Now()
	r.catchUp(now)
	err := r.b.HandleTLP(now, t)
	if err == nil {
		r.flushAt(now, false)
	}
	return err
}

// SendMany hands several TLPs over under one lock and sends them in as few
// frames as the MTU allows. It returns how many were taken; on an error
// the rest were not.
func (r *Runner) SendMany(tlps [][]byte) (int, error) { return r.sendMany(tlps, false) }

// sendMany is SendMany; hold (under HoldSends) leaves framing to
// SendHeld, unless the bridge's queue fills: then the frames are built
// (and sent once the send buffers are full) to make room.
func (r *Runner) sendMany(tlps [][]byte, hold bool) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, ErrClosed
	}
	hold = hold && r.HoldSends
	now := r.Now()
	r.catchUp(now)
	for i, t := range tlps {
		err := r.b.HandleTLP(now, t)
		if err != nil && hold && errors.Is(err, bridge.ErrBusy) {
			r.frame(now)
			err = r.b.HandleTLP(now, t)
		}
		if err != nil {
			if i > 0 {
				r.flushAt(now, hold)
			}
			return i, err
		}
	}
	r.flushAt(now, hold)
	return len(tlps), nil
}

// SendManyHeld is SendMany for a caller with more TLPs on the way (a
// port streaming a burst): it frames and sends only what fills frames and
// leaves the rest queued in the bridge, where the next call's TLPs fill
// the frame. The caller calls SendHeld once it has nothing more ready
// (before it waits, and when it stops); a flush of the runner's own (the
// acknowledgement of a received frame) sends the rest too. A bulk stream
// handed over 16 TLPs at a time then goes out in MTU-sized frames, which
// the transport's segmentation offload sends several to a system call,
// instead of one part-filled frame and one system call per call.
func (r *Runner) SendManyHeld(tlps [][]byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, ErrClosed
	}
	now := r.Now()
	r.catchUp(now)
	for i, t := range tlps {
		err := r.b.HandleTLP(now, t)
		if err != nil && errors.Is(err, bridge.ErrBusy) {
			r.frame(now) // the queue is full: frame it to make room
			err = r.b.HandleTLP(now, t)
		}
		if err != nil {
			if i > 0 {
				r.flushFull(now)
			}
			return i, err
		}
	}
	r.flushFull(now)
	return len(tlps), nil
}

// heldFrames: full frames SendManyHeld keeps until they go out together,
// in one system call the transport's segmentation offload takes whole.
const heldFrames = 4

// flushFull is flushAt for SendManyHeld: it delivers, frames while the
// queued TLPs fill a frame, sends, and leaves the rest for SendHeld.
// Called with mu held.
func (r *Runner) flushFull(now time.Duration) {
	r.deliver()
	for r.b.FrameQueued() {
		if r.txN == len(r.tx) {
			r.sendFrames()
			now = r.Now()
		}
		n := r.b.NextFrame(now, r.tx[r.txN])
		if n == 0 {
			break // the window or the credits hold the rest back
		}
		r.txFrame[r.txN] = r.tx[r.txN][:n]
		r.txN++
	}
	if r.txN >= min(heldFrames, len(r.tx)) {
		r.sendFrames()
	}
	r.held.Store(true)
	if r.timer != nil && !r.busyPoll.Load() {
		r.arm()
	}
}

// Release returns credits (ManualRelease).
func (r *Runner) Release(c tlp.Class, headers, data int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.b.Release(c, headers, data)
	r.flush()
	return err
}

// Reset asks the bridge for an explicit session reset.
func (r *Runner) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.b.Reset(r.Now())
	r.flush()
}

// Run receives frames and serves timers until ctx ends or the transport
// fails; it closes the transport on return.
func (r *Runner) Run(ctx context.Context) error {
	r.mu.Lock()
	r.timer = time.AfterFunc(time.Hour, r.onTimer)
	r.timerAt = bridge.NoDeadline
	r.flush()
	r.mu.Unlock()
	r.live.Store(true)
	defer r.live.Store(false)
	done, shut := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(shut)
		select {
		case <-ctx.Done():
		case <-done:
		}
		r.live.Store(false)
		r.mu.Lock()
		r.closed = true
		r.timer.Stop()
		r.mu.Unlock()
		r.t.Close()
	}()
	// Return only once the transport is closed: a caller that binds
	// its address again next (a new pair on the same port) must find
	// it free, also when the loop ended on ctx without a failed receive.
	defer func() { close(done); <-shut }()
	if r.poller != nil {
		return r.runPolled(ctx)
	}
	if br, ok := r.t.(BatchReceiver); ok {
		return r.runBatch(ctx, br)
	}
	buf := make([]byte, rxBufSize)
	for {
		n, err := r.t.Recv(buf)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("driver: receive: %w", err)
		}
		if !r.handle(buf[:n:n], nil, nil, nil, false, false) {
			return ctx.Err()
		}
	}
}

// rxBuffers returns the receive buffers, made on first use. Called with
// rxMu held.
func (r *Runner) rxBuffers() ([][]byte, []int) {
	if r.rxBufs == nil {
		slab := make([]byte, rxBatch*rxBufSize)
		r.rxBufs, r.rxSizes, r.rxSegs = make([][]byte, rxBatch), make([]int, rxBatch), make([]int, rxBatch)
		for i := range r.rxBufs {
			r.rxBufs[i] = slab[i*rxBufSize : (i+1)*rxBufSize : (i+1)*rxBufSize]
		}
	}
	return r.rxBufs, r.rxSizes
}

// tryRecv takes what the poller holds, with the segment sizes when GRO
// is on (nil segs otherwise: a frame per buffer). Called with rxMu held.
func (r *Runner) tryRecv(bufs [][]byte, sizes []int) (int, []int, error) {
	if r.seg != nil {
		k, err := r.seg.TryRecvSegments(bufs, sizes, r.rxSegs)
		return k, r.rxSegs[:k], err
	}
	k, err := r.poller.TryRecvBatch(bufs, sizes)
	return k, nil, err
}

// runPolled is Run's loop over a Poller: take what is queued, else wait
// until something is. A Poll on another goroutine may take it first; the
// wait then ends with nothing to take, and the loop waits again.
func (r *Runner) runPolled(ctx context.Context) error {
	var lastFrames time.Time // when the loop last took frames (Spin)
	for {
		r.rxMu.Lock()
		bufs, sizes := r.rxBuffers()
		k, segs, err := r.tryRecv(bufs, sizes)
		open := err != nil || k == 0 || r.handle(nil, bufs[:k], sizes[:k], segs, false, true)
		r.rxMu.Unlock()
		if err == nil && k == 0 && r.busyPoll.Load() {
			// A loop polls the socket: waking for frames it takes
			// anyway would only cost a goroutine switch and a processor.
			select {
			case <-r.resume:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		// A part-filled batch took everything queued: trying again at
		// once would cost a system call that finds nothing, so wait,
		// unless the runner spins (Spin).
		if err == nil && (k == 0 || open && k < len(bufs) && !r.busyPoll.Load()) {
			if open && r.spin(k, &lastFrames) {
				runtime.Gosched() // other goroutines of the process first
				continue
			}
			err = r.poller.WaitReadable()
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("driver: receive: %w", err)
		}
		if !open {
			return ctx.Err()
		}
	}
}

// Poll takes the frames the transport holds without waiting, feeds them
// to the bridge, serves the bridge's deadline if it is due, and flushes
// (under HoldSends: delivers, and leaves the sending to SendHeld); it
// returns how many frames it took. Any goroutine may call it, as often
// as it likes: a loop that polls (a clock spinning for its next event)
// handles what arrives on its own goroutine instead of waking the
// runner's. It does nothing while another goroutine is receiving, before
// Run, after Run returned, or when the transport is not a Poller.
func (r *Runner) Poll() int {
	if r.poller == nil || !r.live.Load() || !r.rxMu.TryLock() {
		return 0
	}
	defer r.rxMu.Unlock()
	if !r.busyPoll.Load() {
		r.busyPoll.Store(true)
	}
	bufs, sizes := r.rxBuffers()
	k, segs, err := r.tryRecv(bufs, sizes)
	if err != nil {
		// The socket failed: Run's goroutine reports it (and ends the
		// runner). Hand the socket back, or a loop that never stops
		// polling, as a GPU box's clock does, would hide the failure.
		r.PollIdle()
		return 0
	}
	if k == 0 {
		r.serveDeadline()
		return 0
	}
	if !r.handle(nil, bufs[:k], sizes[:k], segs, true, true) {
		return 0
	}
	r.polled.Add(uint64(k))
	return k
}

// PollIdle tells the runner that the loop calling Poll stops polling for
// now (it goes to sleep, or returns): Run's goroutine, which left the
// socket to Poll since the first Poll after the last PollIdle, waits on
// the socket again, and the bridge's timer, which Polls served meanwhile,
// is armed again. A loop that calls Poll must call PollIdle before it
// stops calling it, or frames and timeouts wait until it polls again.
func (r *Runner) PollIdle() {
	if r.busyPoll.Swap(false) {
		r.mu.Lock()
		if !r.closed && r.timer != nil {
			r.arm()
		}
		r.mu.Unlock()
		select {
		case r.resume <- struct{}{}:
		default:
		}
	}
}

// Polled returns how many frames Poll took (the rest were taken by Run's
// goroutine).
func (r *Runner) Polled() uint64 { return r.polled.Load() }

// serveDeadline runs the bridge's timeout if it is due, ahead of the
// timer's goroutine.
func (r *Runner) serveDeadline() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.timer == nil {
		return
	}
	if now := r.Now(); r.b.Deadline() <= now {
		r.catchUp(now)
		r.b.HandleTimeout(now)
		r.flushAt(now, false)
	}
}

// runBatch is Run's loop over a BatchReceiver.
func (r *Runner) runBatch(ctx context.Context, br BatchReceiver) error {
	r.rxMu.Lock()
	bufs, sizes := r.rxBuffers()
	r.rxMu.Unlock()
	for {
		k, err := br.RecvBatch(bufs, sizes)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("driver: receive: %w", err)
		}
		if !r.handle(nil, bufs[:k], sizes[:k], nil, false, false) {
			return ctx.Err()
		}
	}
}

// handle feeds one frame, or a batch, to the bridge under one lock and one
// clock reading, then flushes once. segs, when not nil, cuts each buffer
// into frames of that size (GRO). polled: Poll's call (OnPolledTLP,
// HoldSends). rxHeld: the caller holds rxMu and bufs are the runner's
// receive buffers (Poll and runPolled): after a stall it takes what else
// waits in the socket before the deadline is served (catchup.go). It
// reports false once the runner is closed.
func (r *Runner) handle(frame []byte, bufs [][]byte, sizes, segs []int, polled, rxHeld bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.polling = polled
	now := r.Now()
	at := now
	if rxHeld {
		at = r.stalledAt(now)
	} else {
		r.catchUp(now)
	}
	progress := r.feed(at, frame, bufs, sizes, segs)
	if at < now && r.drainAt(at, r.rxBufs, r.rxSizes) {
		progress = true
	}
	// A loop that polls serves the deadline here too: frames may come at
	// every poll of a stream, and the timer is not armed meanwhile.
	if r.timer != nil && r.b.Deadline() <= now {
		r.b.HandleTimeout(now)
	}
	if progress {
		select {
		case r.Progress <- struct{}{}:
		default:
		}
	}
	r.flushAt(now, polled && r.HoldSends)
	r.polling = false
	return true
}

// feed hands the bridge frame and the frames in bufs (cut at segs when
// not nil) at now, and reports whether any was taken. Called with mu
// held.
func (r *Runner) feed(now time.Duration, frame []byte, bufs [][]byte, sizes, segs []int) bool {
	progress := false
	one := func(f []byte) {
		if err := r.b.HandleFrame(now, f); err != nil {
			r.lastFrameError = err
			if r.OnFrameDropped != nil {
				r.OnFrameDropped(now, err)
			}
		} else {
			progress = true
		}
	}
	if frame != nil {
		one(frame)
	}
	for i, b := range bufs {
		b = b[:sizes[i]]
		if segs != nil {
			for seg := max(segs[i], 1); len(b) > seg; b = b[seg:] {
				one(b[:seg:seg])
			}
		}
		one(b)
	}
	return progress
}

func (r *Runner) onTimer() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	armed := r.timerAt != bridge.NoDeadline
	r.timerAt = bridge.NoDeadline
	// While a loop polls, its Polls serve the deadline and, under
	// HoldSends, its SendHeld sends: a timer armed before the first Poll
	// must not frame what a turn held from under the loop (PollIdle
	// re-arms it).
	if r.busyPoll.Load() {
		return
	}
	now := r.Now()
	if armed {
		r.noteLate(now - r.fireAt)
	}
	if !r.catchUp(now) {
		// A receive holds the socket after the stall: it feeds what it
		// took and serves the deadline (handle). Look again shortly, in
		// case it found nothing and does not.
		r.timer.Reset(time.Millisecond)
		return
	}
	// The timer may be stale: a flush re-armed it while this call waited
	// for the lock. Then it only re-arms.
	if r.b.Deadline() <= now {
		r.b.HandleTimeout(now)
	}
	r.flushAt(now, false)
}

// flush delivers TLPs and events, sends due frames, and re-arms the timer.
// TLPs go first: releasing their credits before the frames are drained
// lets the acknowledgement of a received batch carry the credits the batch
// freed, instead of a separate credit update AckDelay later. Called with
// mu held.
func (r *Runner) flush() {
	now := r.Now()
	r.catchUp(now)
	r.flushAt(now, false)
}

// SendHeld frames and sends what calls under HoldSends left: the loop
// that polls calls it once a turn, after running what the turn's frames
// brought and handing the bridge what that produced. It costs an atomic
// load when nothing is held.
func (r *Runner) SendHeld() {
	if !r.held.Load() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held.Store(false)
	if r.closed {
		return
	}
	now := r.Now()
	r.catchUp(now)
	r.flushAt(now, false)
}

// flushAt is flush with the clock read by the caller (the time it handed
// the bridge a frame or TLP): a reading costs tens of nanoseconds, and a
// round trip flushes four times. hold delivers TLPs and events only and
// leaves framing and sending to SendHeld. Called with mu held.
func (r *Runner) flushAt(now time.Duration, hold bool) {
	// Before deliver: a PCIe side that gets a TLP sees the peer it came
	// from.
	r.peerPayload.Store(int32(r.b.PeerMaxPayload()))
	if hold {
		r.deliver()
		r.held.Store(true)
		return
	}
	for again := true; again; {
		again = r.deliver()
		if r.frame(now) {
			// A full batch took a while to send: stamp the next
			// frames with the time they leave.
			now = r.Now()
		}
		if r.txN > 0 {
			r.sendFrames()
			if again {
				now = r.Now()
			}
		}
	}
	// While a loop polls, its Polls serve the deadline (PollIdle re-arms
	// the timer): a Go timer re-armed at every flush cost a few hundred
	// nanoseconds of each round trip, and when it fired its goroutine
	// took mu from under the polling loop.
	if r.timer == nil || r.busyPoll.Load() {
		return
	}
	r.arm()
}

// deliver hands the bridge's TLPs, then its events, to the local side
// (see flush for why before framing) and reports whether there were any.
// Called with mu held.
func (r *Runner) deliver() bool {
	r.delivering = true
	defer func() { r.delivering = false }()
	got := false
	for {
		v, ok := r.b.NextTLP(r.Accept)
		if !ok {
			break
		}
		cls, dc := v.Class(), v.DataCredits()
		if r.polling && r.OnPolledTLP != nil {
			r.OnPolledTLP(v)
		} else if r.OnTLP != nil {
			r.OnTLP(v)
		}
		if !r.ManualRelease && !r.b.Config().AutoRelease {
			_ = r.b.Release(cls, 1, dc)
		}
		got = true
	}
	if got && r.OnDelivered != nil {
		r.OnDelivered()
	}
	for {
		e, ok := r.b.NextEvent()
		if !ok {
			break
		}
		if r.OnEvent != nil {
			r.OnEvent(e)
		}
		got = true
	}
	return got
}

// frame builds every frame the bridge has to send into the send buffers,
// sending a batch whenever they are full, and reports whether it sent
// one. The frames it leaves are sent by the caller. Called with mu held.
func (r *Runner) frame(now time.Duration) (sent bool) {
	for {
		if r.txN == len(r.tx) {
			r.sendFrames()
			now, sent = r.Now(), true
		}
		n := r.b.NextFrame(now, r.tx[r.txN])
		if n == 0 {
			return sent
		}
		r.txFrame[r.txN] = r.tx[r.txN][:n]
		r.txN++
	}
}

// arm re-arms the timer when the bridge's deadline moved. (Re-arming only
// for an earlier one and letting the timer wake early for a later one
// costs more: the delayed-ack deadline comes and goes with every other
// frame, and each early wake-up is a goroutine switch and a lock.) Called
// with mu held.
func (r *Runner) arm() {
	if d := r.b.Deadline(); d != r.timerAt && d != bridge.NoDeadline {
		now := r.Now()
		r.timerAt, r.fireAt = d, max(d, now)
		r.timer.Reset(max(d-now, 0))
	}
}

// sendFrames hands the frames collected in tx to the transport, in one
// call where it takes batches. Called with mu held.
func (r *Runner) sendFrames() {
	fs := r.txFrame[:r.txN]
	r.txN = 0
	if r.bs == nil {
		for _, f := range fs {
			if err := r.t.Send(f); err != nil {
				r.sendErrors++
			}
		}
		return
	}
	for len(fs) > 0 {
		n, err := r.bs.SendBatch(fs)
		if err == nil || n >= len(fs) {
			return
		}
		r.sendErrors++ // frame n failed; go on with the rest
		fs = fs[n+1:]
	}
}

// spin reports whether Run's loop polls again instead of waiting, having
// just taken k frames: for Spin after the last frames it took (*last).
func (r *Runner) spin(k int, last *time.Time) bool {
	if r.Spin <= 0 {
		return false
	}
	now := time.Now()
	if k > 0 {
		*last = now
		return true
	}
	return now.Sub(*last) < r.Spin
}

// MaxSpin bounds Spin as the commands take it: a longer poll after the
// last frame is a core kept busy, which a flag should not do by accident.
const MaxSpin = time.Second
