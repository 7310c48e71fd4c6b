package cuda

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/gpudrv"
	"github.com/dxpu/dxpu/emu/host"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// SyncMode says how a host thread waits for the GPU.
type SyncMode int

const (
	// SyncSpin polls the semaphore in host memory (cudaDeviceScheduleSpin).
	SyncSpin SyncMode = iota
	// SyncBlocking sleeps until the GPU's MSI arrives
	// (cudaDeviceScheduleBlockingSync).
	SyncBlocking
)

// Config tunes the driver.
type Config struct {
	Sync SyncMode
	// PollDelay is how long after a semaphore write lands a spinning CPU
	// sees it; InterruptLatency how long an MSI takes to wake a thread.
	PollDelay        time.Duration
	InterruptLatency time.Duration
	// LaunchCPU and CallCPU are the CPU time of a launch and of any other
	// API call in the blocking API.
	LaunchCPU time.Duration
	CallCPU   time.Duration
	// RingEntries is the GPFIFO size of each stream; PushbufferBytes the
	// size of its pushbuffer ring.
	RingEntries     int
	PushbufferBytes uint64
	// Commands places each stream's GPFIFO ring and pushbuffer: in host
	// memory (the default: the GPU fetches them with DMA reads) or in
	// device memory (written through BAR1; the GPU fetches them locally,
	// so a launch crosses a fabric as posted writes only).
	Commands gpudrv.Placement
}

func (c *Config) defaults() {
	if c.PollDelay == 0 {
		c.PollDelay = 50 * time.Nanosecond
	}
	if c.InterruptLatency == 0 {
		c.InterruptLatency = 4 * time.Microsecond
	}
	if c.LaunchCPU == 0 {
		c.LaunchCPU = 2500 * time.Nanosecond
	}
	if c.CallCPU == 0 {
		c.CallCPU = 500 * time.Nanosecond
	}
	if c.RingEntries == 0 {
		c.RingEntries = 4096
	}
	if c.PushbufferBytes == 0 {
		c.PushbufferBytes = 4 << 20
	}
}

// Errors.
var (
	ErrDeviceLost = errors.New("cuda: device was removed")
	ErrRingFull   = errors.New("cuda: GPFIFO ring full")
	// ErrChannelStopped is what a *ChannelError matches (errors.Is): a
	// channel of the device stopped on a fault.
	ErrChannelStopped = errors.New("cuda: channel stopped")
	// ErrStalled: the simulation could make no more progress (no event
	// left, or the host's driver gave up waiting) before what a blocking
	// call waited for happened.
	ErrStalled = errors.New("cuda: simulation stalled")
)

// ChannelError is the error of a device one of whose streams' channel
// stopped on a fault (a command fetch or a copy's DMA read answered with
// an error status, a malformed pushbuffer): the GPU posted the fault to
// the channel's error notifier. As CUDA's sticky errors, it ends every
// wait on the device whose work is not done and fails every later
// submission to it.
type ChannelError struct {
	Device int    // index in Context.Devices
	ID     tlp.ID // the device's routing ID
	Stream int    // the stopped stream's channel number on the device
	Fault  gpu.ChannelFault
}

func (e *ChannelError) Error() string {
	return fmt.Sprintf("cuda: device %d (%v) stream %d: channel stopped: %v", e.Device, e.ID, e.Stream, e.Fault)
}

// Is makes errors.Is(err, ErrChannelStopped) hold.
func (e *ChannelError) Is(target error) bool { return target == ErrChannelStopped }

// Context is the driver on one host, over the GPUs it enumerated.
type Context struct {
	rc       *host.RootComplex
	s        *sim.Sim
	cfg      Config
	Devices  []*Device
	msiWait  []func()
	msiSpare []func()
	// spinWait holds spinning waiters, which no MSI wakes: a surprise
	// removal must still end their wait (the driver's hot-plug notification).
	spinWait []*hostWait
	waits    []*hostWait // free list
	flags    []*flag     // free list
	wakeMSIF func()
	prof     *Profiler
	corr     uint32
}

// Device is one GPU as the driver sees it.
type Device struct {
	ctx     *Context
	Info    *host.Device
	bar0    uint64
	bar1    uint64 // VRAM aperture; 0 if enumeration assigned none
	streams []*Stream
	vram    uint64
	lost    bool
	// fault is the first channel fault the GPU reported (sticky).
	fault *ChannelError
}

// Stream is a CUDA stream: one GPFIFO channel of its device.
type Stream struct {
	d    *Device
	ch   *gpudrv.Channel
	vsem uint64 // VRAM semaphore for cross-stream ordering
	// notifiedF runs at the GPU's write of the channel's error notifier,
	// faultF when the host sees it.
	notifiedF, faultF func()
}

// Event is a CUDA event: a host semaphore (value then GPU timestamp) and a
// VRAM mirror that other streams acquire.
type Event struct {
	host   uint64
	vram   uint64
	dev    *Device
	value  uint64
	stream *Stream // of the last record
	corr   uint32  // correlation of the last record
}

// New opens the driver on the enumerated GPUs of rc. It routes the host's
// MSIs to waiting threads.
func New(rc *host.RootComplex, devs []*host.Device, cfg Config) (*Context, error) {
	cfg.defaults()
	c := &Context{rc: rc, s: rc.Sim(), cfg: cfg}
	c.wakeMSIF = c.wakeMSI
	prev := rc.OnMSI
	rc.OnMSI = func(data uint32) {
		if prev != nil {
			prev(data)
		}
		c.s.After(cfg.InterruptLatency, c.wakeMSIF)
	}
	prevRm := rc.OnRemove
	rc.OnRemove = func(hd *host.Device) {
		if prevRm != nil {
			prevRm(hd)
		}
		for _, d := range c.Devices {
			if d.Info == hd {
				d.lost = true
			}
		}
		c.wakeMSI()
		c.wakeSpinners()
	}
	for _, hd := range devs {
		if hd.Vendor != 0x10de {
			continue
		}
		b0, ok := hd.BAR(0)
		if !ok || b0.Addr == 0 {
			return nil, fmt.Errorf("cuda: GPU %v has no BAR0", hd.ID)
		}
		d := &Device{ctx: c, Info: hd, bar0: b0.Addr, vram: 1 << 20}
		if b1, ok := hd.BAR(1); ok {
			d.bar1 = b1.Addr
		}
		boot, err := rc.MMIORead32(d.bar0 + gpu.RegBoot0)
		if err != nil {
			return nil, fmt.Errorf("cuda: GPU %v: reading BOOT_0: %w", hd.ID, err)
		}
		if boot == 0 || boot == 0xffffffff {
			return nil, fmt.Errorf("cuda: GPU %v: BOOT_0 reads %#x", hd.ID, boot)
		}
		c.Devices = append(c.Devices, d)
	}
	return c, nil
}

// Sim returns the simulator the host runs on.
func (c *Context) Sim() *sim.Sim { return c.s }

// Host returns the root complex.
func (c *Context) Host() *host.RootComplex { return c.rc }

// NewStream creates a channel on d, its commands placed as Config.Commands
// says: a GPFIFO ring and a pushbuffer, a tracking semaphore in host
// memory, and the MMIO writes that tell the GPU.
func (d *Device) NewStream() (*Stream, error) { return d.NewStreamPlaced(d.ctx.cfg.Commands) }

// NewStreamPlaced creates a channel on d with its commands placed as cmds
// says, whatever Config.Commands is.
func (d *Device) NewStreamPlaced(cmds gpudrv.Placement) (*Stream, error) {
	c := d.ctx
	if len(d.streams) >= gpu.MaxChannels {
		return nil, fmt.Errorf("cuda: device %v: out of channels", d.Info.ID)
	}
	flags := uint32(0)
	if c.cfg.Sync == SyncBlocking {
		flags = gpu.SemMSI
	}
	cc := gpudrv.ChannelConfig{Entries: c.cfg.RingEntries, PushbufferBytes: c.cfg.PushbufferBytes, SemFlags: flags, Commands: cmds, Notifier: true}
	if cmds == gpudrv.DeviceMemory {
		if d.bar1 == 0 {
			return nil, fmt.Errorf("cuda: device %v: commands in device memory need BAR1, which has no address", d.Info.ID)
		}
		cc.BAR1, cc.VRAM = d.bar1, d.allocAligned(cc.DeviceBytes(), 4096)
	}
	ch, err := gpudrv.OpenChannel(rcHost{c.rc}, d.bar0, len(d.streams), cc)
	if err != nil {
		return nil, fmt.Errorf("cuda: device %v: %w", d.Info.ID, err)
	}
	st := &Stream{d: d, ch: ch}
	st.notifiedF, st.faultF = st.notified, st.noteFault
	st.vsem = d.alloc(64)
	d.streams = append(d.streams, st)
	c.rc.Watch(ch.Notifier(), st.notifiedF)
	return st, nil
}

// notified runs at a write of the channel's error notifier: the driver
// sees it when its interrupt handler runs (blocking sync) or when the
// spinning CPU looks (spin).
func (st *Stream) notified() {
	c := st.d.ctx
	d := c.cfg.PollDelay
	if c.cfg.Sync == SyncBlocking {
		d = c.cfg.InterruptLatency
	}
	c.s.After(d, st.faultF)
}

// noteFault reads the notifier: a fault stops the device's work (sticky)
// and ends the waits on it.
func (st *Stream) noteFault() {
	c := st.d.ctx
	var b [gpu.NotifierBytes]byte
	c.rc.Mem.Read(st.ch.Notifier(), b[:])
	f := gpu.DecodeNotifier(b[:])
	if f.Reason == gpu.FaultNone {
		c.rc.Watch(st.ch.Notifier(), st.notifiedF)
		return
	}
	if st.d.fault == nil {
		st.d.fault = &ChannelError{Device: st.d.index(), ID: st.d.Info.ID, Stream: st.ch.Index(), Fault: f}
	}
	c.wakeMSI()
	c.wakeSpinners()
}

func (d *Device) alloc(n uint64) uint64 { return d.allocAligned(n, 256) }

func (d *Device) allocAligned(n, align uint64) uint64 {
	a := (d.vram + align - 1) &^ (align - 1)
	d.vram = a + n
	return a
}

// Malloc reserves n bytes of VRAM.
func (d *Device) Malloc(n uint64) uint64 { return d.alloc(n) }

// BAR0 returns the address of the device's register BAR.
func (d *Device) BAR0() uint64 { return d.bar0 }

// Lost reports whether the device was surprise-removed.
func (d *Device) Lost() bool { return d.lost }

// Err returns ErrDeviceLost once the device was removed, its
// *ChannelError once one of its channels stopped on a fault, else nil.
func (d *Device) Err() error {
	if d.lost {
		return ErrDeviceLost
	}
	if d.fault != nil {
		return d.fault
	}
	return nil
}

// Err returns the error that ends the work of the stream's device (see
// Device.Err), or nil.
func (st *Stream) Err() error { return st.d.Err() }

// Index returns the stream's channel number on its device.
func (st *Stream) Index() int { return st.ch.Index() }

// Device returns the stream's device.
func (st *Stream) Device() *Device { return st.d }

// Completed returns the last sequence number the GPU released to host memory.
func (st *Stream) Completed() uint64 { return st.d.ctx.rc.Mem.Uint64(st.ch.Semaphore()) }

// Submitted returns the last sequence number submitted.
func (st *Stream) Submitted() uint64 { return st.ch.Submitted() }

// Submit writes cmds and a tracking semaphore release into the pushbuffer,
// appends a GPFIFO entry and rings the doorbell. It returns the sequence
// number the GPU releases when the work is done.
func (st *Stream) Submit(cmds ...gpu.Command) (uint64, error) {
	if err := st.d.Err(); err != nil {
		return 0, err
	}
	seq, err := st.ch.Submit(st.Completed(), cmds...)
	if errors.Is(err, gpudrv.ErrRingFull) {
		return 0, ErrRingFull
	}
	return seq, err
}

// OnDone calls fn once the host has seen the stream reach seq: when a
// spinning CPU sees the semaphore write, or when the MSI wakes the thread;
// or once the device was lost or one of its channels stopped (then
// Completed is below seq and Err says why). fn runs in simulator context.
func (st *Stream) OnDone(seq uint64, fn func()) {
	st.d.ctx.whenSeen(st.ch.Semaphore(), seq, st.d, fn)
}

// wait blocks the host thread until f is set. It reports whether it was:
// false when the simulation can make no more progress first.
func (c *Context) wait(f *flag) bool {
	return c.rc.RunWhile(f.unsetF) && f.set
}

// where names d and st (nil: none) in errors.
func (d *Device) where(st *Stream) string {
	if st == nil {
		return fmt.Sprintf("device %d (%v)", d.index(), d.Info.ID)
	}
	return fmt.Sprintf("device %d (%v) stream %d", d.index(), d.Info.ID, st.ch.Index())
}

// CPU lets d of host CPU time pass.
func (c *Context) CPU(d time.Duration) { c.rc.Advance(d) }

// Now returns the virtual time.
func (c *Context) Now() time.Duration { return c.s.Now() }

func (c *Context) submit(name string, st *Stream, cpu time.Duration, cmds ...gpu.Command) error {
	start := c.Now()
	corr := c.nextCorr()
	for i := range cmds {
		if cmds[i].Op == gpu.OpKernel || cmds[i].Op == gpu.OpCopy || cmds[i].Op == gpu.OpMemset {
			cmds[i].Marker = corr
		}
	}
	c.noteStream(corr, st)
	c.CPU(cpu)
	_, err := st.Submit(cmds...)
	c.call(name, start, corr)
	return err
}

// Launch launches a kernel that runs for dur.
func (c *Context) Launch(st *Stream, dur time.Duration) error {
	return c.submit("cudaLaunchKernel", st, c.cfg.LaunchCPU, gpu.Command{Op: gpu.OpKernel, Duration: uint64(dur)})
}

// MemcpyHtoDAsync copies n bytes of pinned host memory at src to VRAM dst.
func (c *Context) MemcpyHtoDAsync(st *Stream, dst, src, n uint64) error {
	return c.submit("cudaMemcpyAsync", st, c.cfg.CallCPU, gpu.Command{Op: gpu.OpCopy, Dir: gpu.DirH2D, Src: src, Dst: dst, Len: n})
}

// MemcpyDtoHAsync copies n bytes of VRAM at src to pinned host memory dst.
func (c *Context) MemcpyDtoHAsync(st *Stream, dst, src, n uint64) error {
	return c.submit("cudaMemcpyAsync", st, c.cfg.CallCPU, gpu.Command{Op: gpu.OpCopy, Dir: gpu.DirD2H, Src: src, Dst: dst, Len: n})
}

// syncCopy is cudaMemcpy: submit, then wait for the stream, as one call.
func (c *Context) syncCopy(st *Stream, cmd gpu.Command) error {
	start := c.Now()
	corr := c.nextCorr()
	cmd.Marker = corr
	c.noteStream(corr, st)
	c.CPU(c.cfg.CallCPU)
	if _, err := st.Submit(cmd); err != nil {
		return err
	}
	err := c.waitStream(st)
	c.call("cudaMemcpy", start, corr)
	return err
}

// MemcpyHtoD is the synchronous copy.
func (c *Context) MemcpyHtoD(st *Stream, dst, src, n uint64) error {
	return c.syncCopy(st, gpu.Command{Op: gpu.OpCopy, Dir: gpu.DirH2D, Src: src, Dst: dst, Len: n})
}

// MemcpyDtoH is the synchronous copy.
func (c *Context) MemcpyDtoH(st *Stream, dst, src, n uint64) error {
	return c.syncCopy(st, gpu.Command{Op: gpu.OpCopy, Dir: gpu.DirD2H, Src: src, Dst: dst, Len: n})
}

// MemsetAsync sets n bytes of VRAM at dst to v.
func (c *Context) MemsetAsync(st *Stream, dst uint64, v byte, n uint64) error {
	return c.submit("cudaMemsetAsync", st, c.cfg.CallCPU, gpu.Command{Op: gpu.OpMemset, Dst: dst, Value: uint64(v), Len: n})
}

func (c *Context) waitStream(st *Stream) error {
	f := c.newFlag()
	defer c.putFlag(f)
	seq := st.ch.Submitted()
	st.OnDone(seq, f.setF)
	if !c.wait(f) {
		return fmt.Errorf("%w: %s: waited for sequence %d, the host saw %d", ErrStalled, st.d.where(st), seq, st.Completed())
	}
	if st.d.lost {
		return ErrDeviceLost
	}
	if st.Completed() < seq && st.d.fault != nil {
		return st.d.fault
	}
	return nil
}

// StreamSynchronize blocks until all work submitted to st is done.
func (c *Context) StreamSynchronize(st *Stream) error {
	start := c.Now()
	corr := c.nextCorr()
	c.CPU(c.cfg.CallCPU)
	err := c.waitStream(st)
	c.call("cudaStreamSynchronize", start, corr)
	if c.prof != nil {
		c.sync("Stream Sync", start, corr, map[string]any{"stream": st.id(), "device": st.d.index()})
	}
	return err
}

// DeviceSynchronize blocks until every stream of d is done.
func (c *Context) DeviceSynchronize(d *Device) error {
	start := c.Now()
	corr := c.nextCorr()
	c.CPU(c.cfg.CallCPU)
	var err error
	for _, st := range d.streams {
		if err = c.waitStream(st); err != nil {
			break
		}
	}
	c.call("cudaDeviceSynchronize", start, corr)
	if c.prof != nil {
		c.sync("Context Sync", start, corr, map[string]any{"stream": -1, "device": d.index()})
	}
	return err
}

func (d *Device) index() int {
	for i, x := range d.ctx.Devices {
		if x == d {
			return i
		}
	}
	return -1
}

// NewEvent creates an event on d.
func (d *Device) NewEvent() *Event {
	return &Event{host: d.ctx.rc.Alloc(64, 64), vram: d.alloc(64), dev: d}
}

// EventRecord records ev on st: the GPU releases the event's semaphores,
// with a timestamp, once earlier work on st is done.
func (c *Context) EventRecord(ev *Event, st *Stream) error {
	prev := ev.stream
	ev.value++
	ev.stream = st
	err := c.submit("cudaEventRecord", st, c.cfg.CallCPU,
		gpu.Command{Op: gpu.OpSemRelease, Addr: ev.vram, Value: ev.value},
		gpu.Command{Op: gpu.OpSemRelease, Addr: ev.host, Value: ev.value, Flags: gpu.SemHost | gpu.SemTime})
	if err != nil {
		// Not recorded: a wait for the event waits for its last record.
		ev.value--
		ev.stream = prev
		return err
	}
	ev.corr = c.corr
	return nil
}

// StreamWaitEvent makes later work on st wait for ev's last record (a
// semaphore acquire executed by st's channel; no host round trip).
func (c *Context) StreamWaitEvent(st *Stream, ev *Event) error {
	if ev.dev != st.d {
		return fmt.Errorf("cuda: cross-device event waits are not emulated")
	}
	start := c.Now()
	err := c.submit("cudaStreamWaitEvent", st, c.cfg.CallCPU, gpu.Command{Op: gpu.OpSemAcquire, Addr: ev.vram, Value: ev.value})
	if ev.stream != nil && c.prof != nil {
		c.sync("Stream Wait Event", start, c.corr, map[string]any{"stream": st.id(), "device": st.d.index(),
			"wait_on_stream": ev.stream.id(), "wait_on_cuda_event_record_corr_id": ev.corr})
	}
	return err
}

// EventSynchronize blocks until ev's last record is done.
func (c *Context) EventSynchronize(ev *Event) error {
	start := c.Now()
	corr := c.nextCorr()
	c.CPU(c.cfg.CallCPU)
	f := c.newFlag()
	defer c.putFlag(f)
	c.whenSeen(ev.host, ev.value, ev.dev, f.setF)
	if !c.wait(f) {
		return fmt.Errorf("%w: %s: waited for an event to reach %d, the host saw %d", ErrStalled,
			ev.dev.where(ev.stream), ev.value, c.rc.Mem.Uint64(ev.host))
	}
	c.call("cudaEventSynchronize", start, corr)
	if ev.stream != nil && c.prof != nil {
		c.sync("Event Sync", start, corr, map[string]any{"device": ev.dev.index(), "wait_on_stream": ev.stream.id(),
			"wait_on_cuda_event_record_corr_id": ev.corr})
	}
	if ev.dev.lost {
		return ErrDeviceLost
	}
	if c.rc.Mem.Uint64(ev.host) < ev.value && ev.dev.fault != nil {
		return ev.dev.fault
	}
	return nil
}

// EventElapsed returns the GPU time between two completed events.
func (c *Context) EventElapsed(start, end *Event) (time.Duration, error) {
	var a, b [8]byte
	c.rc.Mem.Read(start.host+8, a[:])
	c.rc.Mem.Read(end.host+8, b[:])
	if c.rc.Mem.Uint64(start.host) < start.value || c.rc.Mem.Uint64(end.host) < end.value {
		return 0, fmt.Errorf("cuda: event not yet completed")
	}
	return time.Duration(binary.LittleEndian.Uint64(b[:]) - binary.LittleEndian.Uint64(a[:])), nil
}

// MallocHost reserves n bytes of pinned host memory.
func (c *Context) MallocHost(n uint64) uint64 { return c.rc.Alloc(n, 4096) }

// ReadRegister performs an MMIO read of a BAR0 register of d (a full round
// trip: reads are non-posted).
func (c *Context) ReadRegister(d *Device, off uint64) (uint32, error) {
	return c.rc.MMIORead32(d.bar0 + off)
}

// rcHost is the emulated root complex as the driver's Host.
type rcHost struct{ rc *host.RootComplex }

func (h rcHost) Alloc(n, align uint64) (uint64, error)   { return h.rc.Alloc(n, align), nil }
func (h rcHost) WriteMem(addr uint64, p []byte) error    { h.rc.Mem.Write(addr, p); return nil }
func (h rcHost) ReadMem(addr uint64, p []byte) error     { h.rc.Mem.Read(addr, p); return nil }
func (h rcHost) MMIOWrite32(addr uint64, v uint32) error { return h.rc.MMIOWrite32(addr, v) }
func (h rcHost) MMIOWrite(addr uint64, p []byte) error   { return h.rc.MMIOWrite(addr, p) }
