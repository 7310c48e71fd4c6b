package qemuproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/vmm"
	"github.com/dxpu/dxpu/tlp"
)

// ServerStats count the protocol side; vmm.Port.Stats counts the PCIe side.
type ServerStats struct {
	Messages   atomic.Uint64 // messages read
	MapChanges atomic.Uint64 // SYNC_SYSMEM applied
	Resets     atomic.Uint64 // DEVICE_RESET answered
	IRQFDs     atomic.Uint64 // SET_IRQFD received (closed: see the package doc)
	// DroppedAfterEnd counts the bridge's TLPs that found the session
	// over (QEMU gone, ctx done): the device's DMA into or out of a guest
	// that is no longer served, and completions nobody waits for. They
	// touch no guest memory and get no answer; a device read among them
	// ends in the device's own completion timeout.
	DroppedAfterEnd atomic.Uint64
	// LostAnswers counts accesses whose RET found QEMU gone (its vCPU was
	// waiting when it died).
	LostAnswers atomic.Uint64
}

// Server serves one proxy socket: QEMU's accesses go through a vmm.Port
// into a host-side bridge runner, and the device's DMA reaches the guest
// RAM QEMU shares. One Server per guest function.
type Server struct {
	conn  *Conn
	port  *vmm.Port
	ram   *vmm.GuestRAM
	r     *driver.Runner
	log   *slog.Logger
	stats ServerStats

	mu      sync.Mutex // guards port
	answers chan vmm.Answer
	down    chan struct{} // signalled when the link goes down

	queue *driver.TLPQueue // TLPs from the bridge, in arrival order

	// endMu orders HandleTLP against the end of Run, so that every TLP is
	// either served or counted in DroppedAfterEnd, never stranded.
	endMu  sync.Mutex
	ended  atomic.Bool  // set once, under endMu, when Run is ending
	queued atomic.Int64 // TLPs in queue not yet served
}

// NewServer joins the proxy connection conn to the host-side runner r
// through port, whose DMA is served from ram (the Server installs the
// maps QEMU sends). It sets r.OnTLP and r.OnEvent, so call it before
// r.Run. log may be nil.
func NewServer(conn *Conn, port *vmm.Port, ram *vmm.GuestRAM, r *driver.Runner, log *slog.Logger) (*Server, error) {
	s, err := NewAttachedServer(conn, port, ram, r, log)
	if err != nil {
		return nil, err
	}
	r.OnTLP, r.OnEvent = s.HandleTLP, s.HandleEvent
	return s, nil
}

// NewAttachedServer is NewServer for a runner whose hooks belong to
// someone else (a bridge agent's pair, running before QEMU connects and
// after it leaves): it leaves r.OnTLP and r.OnEvent alone, and the
// runner's owner passes the pair's TLPs and events on with HandleTLP and
// HandleEvent.
func NewAttachedServer(conn *Conn, port *vmm.Port, ram *vmm.GuestRAM, r *driver.Runner, log *slog.Logger) (*Server, error) {
	if conn == nil || port == nil || ram == nil || r == nil {
		return nil, fmt.Errorf("%w: NewServer needs a connection, a port, guest RAM and a runner", vmm.ErrConfig)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{conn: conn, port: port, ram: ram, r: r, log: log,
		answers: make(chan vmm.Answer, 1), down: make(chan struct{}, 1), queue: driver.NewTLPQueue()}, nil
}

// HandleTLP takes a TLP the bridge delivered (the runner's OnTLP). It runs
// with the runner's lock held: it queues, never sends. Once Run is ending
// it drops v and counts it (DroppedAfterEnd).
func (s *Server) HandleTLP(v tlp.View) {
	s.endMu.Lock()
	defer s.endMu.Unlock()
	if s.ended.Load() {
		s.stats.DroppedAfterEnd.Add(1)
		return
	}
	s.queued.Add(1)
	s.queue.Push(v)
}

// HandleEvent takes a bridge event (the runner's OnEvent): a link down or
// surprise removal answers the access in flight with all ones.
func (s *Server) HandleEvent(e bridge.Event) {
	if e.Kind == bridge.EventLinkDown || e.Kind == bridge.EventSurpriseRemoval {
		signal(s.down)
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Stats returns the protocol counters.
func (s *Server) Stats() *ServerStats { return &s.stats }

// Run serves until QEMU closes the socket between messages (nil), ctx
// ends (nil, or ctx's cause when it was cancelled with one: a launcher
// that saw QEMU die says so), or the stream breaks: a malformed message
// (a *MsgError), or QEMU gone mid-message or before its vCPU got its
// answer (ErrQEMUGone). An access in flight when QEMU dies ends within the
// port's completion timeout. Run closes the connection and drops the
// bridge's TLPs that come after, counting them (DroppedAfterEnd); no TLP
// touches guest RAM once it has returned. Guest RAM stays mapped until
// ram.Close, which the caller does after Run. Run is called once.
func (s *Server) Run(ctx context.Context) error {
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.deliver(ctx) }()
	stop := context.AfterFunc(ctx, func() { _ = s.conn.Close() })
	defer func() {
		stop()
		_ = s.conn.Close()
		s.endMu.Lock()
		s.ended.Store(true)
		s.endMu.Unlock()
		cancel()
		wg.Wait()
		// What the device sent that deliver had not served yet.
		s.stats.DroppedAfterEnd.Add(uint64(s.queued.Swap(0)))
	}()
	stopped := func() error {
		if c := context.Cause(parent); c != nil && !errors.Is(c, context.Canceled) && !errors.Is(c, context.DeadlineExceeded) {
			return fmt.Errorf("qemuproxy: stopped after %d messages: %w", s.stats.Messages.Load(), c)
		}
		return nil
	}
	for {
		m, err := s.conn.ReadMsg()
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return stopped()
		case errors.Is(err, io.EOF):
			return nil
		case peerGone(err):
			return fmt.Errorf("%w after %d messages: %w", ErrQEMUGone, s.stats.Messages.Load(), err)
		default:
			return fmt.Errorf("qemuproxy: reading QEMU's socket: %w", err)
		}
		s.stats.Messages.Add(1)
		if err := s.handle(ctx, m); err != nil {
			if ctx.Err() != nil {
				return stopped()
			}
			return err
		}
	}
}

func (s *Server) handle(ctx context.Context, m Msg) error {
	switch m.Cmd {
	case SyncSysmem:
		return s.syncSysmem(m)
	case SetIRQFD:
		s.stats.IRQFDs.Add(1)
		closeAll(m.FDs)
		s.log.Info("qemuproxy: INTx eventfds received and closed; the guest polls (no interrupts through the proxy device)")
		return nil
	case DeviceReset:
		s.stats.Resets.Add(1)
		return s.answer(m, 0)
	case Ret:
		return fmt.Errorf("qemuproxy: QEMU sent RET %#x, an answer nobody asked for", m.Value)
	}
	a := vmm.Access{Size: int(m.Cfg.Len), Addr: uint64(m.Cfg.Addr), Val: uint64(m.Cfg.Val)}
	switch m.Cmd {
	case CfgRead:
		a.Op = vmm.CfgRead
	case CfgWrite:
		a.Op = vmm.CfgWrite
	case BarRead, BarWrite:
		a = vmm.Access{Op: vmm.BarRead, Addr: m.Bar.Addr, Size: int(m.Bar.Size), Val: m.Bar.Val}
		if m.Cmd == BarWrite {
			a.Op = vmm.BarWrite
		}
		if !m.Bar.Memory {
			// No I/O BARs are presented; an I/O access reaching here is
			// answered as a master abort.
			return s.answer(m, vmm.AllOnes>>(64-8*a.Size))
		}
	}
	return s.answer(m, s.access(ctx, a))
}

// answer writes m's RET; a QEMU that died while its vCPU waited for it is
// ErrQEMUGone naming the access.
func (s *Server) answer(m Msg, v uint64) error {
	err := s.conn.WriteRet(v)
	if err == nil {
		return nil
	}
	what := m.Cmd.String()
	switch m.Cmd {
	case CfgRead, CfgWrite:
		what += fmt.Sprintf(" of %d bytes at config offset %#x", m.Cfg.Len, m.Cfg.Addr)
	case BarRead, BarWrite:
		what += fmt.Sprintf(" of %d bytes at %#x", m.Bar.Size, m.Bar.Addr)
	}
	if peerGone(err) {
		s.stats.LostAnswers.Add(1)
		return fmt.Errorf("%w while its vCPU waited for the answer to %s: %w", ErrQEMUGone, what, err)
	}
	return fmt.Errorf("qemuproxy: answering %s: %w", what, err)
}

// access runs one guest access to its answer; it never blocks longer than
// the completion timeout (plus the bridge's send wait, bounded the same).
func (s *Server) access(ctx context.Context, a vmm.Access) uint64 {
	select {
	case <-s.down: // a link-down from before this access: SendWait below sees the state itself
	default:
	}
	s.mu.Lock()
	step, err := s.port.Begin(s.r.Now(), a)
	var req []byte
	if step.TLP != nil {
		req = append(req, step.TLP...)
	}
	deadline, _ := s.port.Deadline()
	s.mu.Unlock()
	if err != nil {
		s.log.Debug("qemuproxy: access refused", "op", a.Op, "addr", a.Addr, "err", err)
	}
	if req != nil {
		sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond+max(0, deadline-s.r.Now()))
		err := driver.SendWait(sctx, s.r, req)
		cancel()
		if err != nil && !step.Done {
			s.mu.Lock()
			ans := s.port.Abort(fmt.Errorf("vmm: request not sent: %w", err))
			s.mu.Unlock()
			return ans.Value
		}
	}
	if step.Done {
		return step.Value
	}
	t := time.NewTimer(max(0, deadline-s.r.Now()))
	defer t.Stop()
	for {
		select {
		case ans := <-s.answers:
			return ans.Value
		case <-s.down:
			s.mu.Lock()
			ans := s.port.Abort(errors.New("vmm: link down"))
			s.mu.Unlock()
			if ans.Done {
				return ans.Value
			}
		case <-t.C:
			s.mu.Lock()
			ans := s.port.Expire(s.r.Now())
			s.mu.Unlock()
			if ans.Done {
				return ans.Value
			}
			t.Reset(time.Millisecond) // the completion won the race: it is in answers
		case <-ctx.Done():
			s.mu.Lock()
			ans := s.port.Abort(ctx.Err())
			s.mu.Unlock()
			return ans.Value
		}
	}
}

// deliver hands the bridge's TLPs to the port in arrival order, so a
// completion never passes the device's posted writes before it (PCIe
// ordering: the guest that reads a register sees the DMA before it).
func (s *Server) deliver(ctx context.Context) {
	emit := func(b []byte) error { return driver.SendWait(ctx, s.r, b) }
	_ = s.queue.Serve(ctx, func(b []byte) error {
		if s.ended.Load() {
			return errEnded // the rest stays queued: Run counts it dropped
		}
		s.queued.Add(-1)
		s.mu.Lock()
		ans, err := s.port.Receive(b, emit)
		s.mu.Unlock()
		if err != nil {
			s.log.Debug("qemuproxy: device TLP not served", "err", err)
		}
		if ans.Done {
			select {
			case s.answers <- ans:
			case <-ctx.Done(): // the access gave up: Run is ending
			}
		}
		return nil
	})
}

var errEnded = errors.New("qemuproxy: session ended")

// syncSysmem maps the regions QEMU sent and retires the previous map.
func (s *Server) syncSysmem(m Msg) error {
	defer closeAll(m.FDs)
	regions := make([]vmm.RAMRegion, 0, len(m.Regions))
	var unmaps []func()
	release := func() {
		for _, u := range unmaps {
			u()
		}
	}
	for i, r := range m.Regions {
		reg, unmap, err := vmm.MapFD(m.FDs[i], r.GPA, r.Size, r.Offset)
		if err != nil {
			release()
			return fmt.Errorf("qemuproxy: SYNC_SYSMEM region %d: %w", i, err)
		}
		regions = append(regions, reg)
		unmaps = append(unmaps, unmap)
	}
	if err := s.ram.Replace(regions, release); err != nil {
		release()
		return fmt.Errorf("qemuproxy: SYNC_SYSMEM: %w", err)
	}
	s.stats.MapChanges.Add(1)
	return nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		_ = unix.Close(fd)
	}
}
