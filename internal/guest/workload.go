package guest

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/gpudrv"
	"github.com/dxpu/dxpu/sim"
)

// ErrTimeout is work the GPU did not finish in time while its registers
// still answered.
var ErrTimeout = errors.New("guest: GPU work timed out")

// Options configure Run.
type Options struct {
	// Root is the sysfs PCI directory (default SysfsPCI).
	Root string
	// Vendor and Device pick the GPU (defaults 10de and any device).
	Vendor, Device string
	// Bytes is the size of each copy (default 64 MiB).
	Bytes uint64
	// Channel is the GPFIFO channel used (default 0).
	Channel int
	// Timeout bounds each wait for the GPU (default 60 s).
	Timeout time.Duration
	// Samples is the number of MMIO reads per latency figure (default 200).
	Samples int
	// WaitDevice is how long to wait for the GPU to appear (a hot-add);
	// 0 looks once.
	WaitDevice time.Duration
	// WaitRemoval, if not 0, waits that long after the work for the GPU to
	// disappear (a hot-remove) and reports it.
	WaitRemoval time.Duration
	// Events receives one EventPrefix line per step (may be nil).
	Events io.Writer
}

func (o *Options) fill() {
	if o.Root == "" {
		o.Root = SysfsPCI
	}
	if o.Vendor == "" {
		o.Vendor = "10de"
	}
	if o.Bytes == 0 {
		o.Bytes = DefaultCopyBytes
	}
	if o.Timeout == 0 {
		o.Timeout = 60 * time.Second
	}
	if o.Samples == 0 {
		o.Samples = 200
	}
}

// Run finds the GPU, drives it and reports; a failure is in Report.Error
// (and the returned error), with the figures gathered until then.
func Run(ctx context.Context, o Options) (Report, error) {
	o.fill()
	start := time.Now()
	r := &runner{o: o, rep: Report{PCI: []Function{}}}
	err := r.run(ctx)
	if err != nil {
		r.rep.Error = err.Error()
	}
	r.rep.Seconds = time.Since(start).Seconds()
	return r.rep, err
}

type runner struct {
	o    Options
	rep  Report
	bar  *BAR
	host *Host
	ch   *gpudrv.Channel
}

func (r *runner) event(name string, kv ...any) { emit(r.o.Events, name, kv...) }

func (r *runner) run(ctx context.Context) error {
	f, err := r.find(ctx)
	if err != nil {
		return err
	}
	r.rep.GPU = f.BDF
	r.event("found", "bdf", f.BDF)
	if err := Enable(r.o.Root, f.BDF); err != nil {
		return err
	}
	if r.rep.PCI, err = List(r.o.Root); err != nil { // again: BARs as enabled
		return err
	}
	cfg, err := ReadConfig(r.o.Root, f.BDF)
	if err != nil {
		return err
	}
	r.rep.Config, r.rep.ConfigSize = hex.EncodeToString(cfg), len(cfg)
	if r.bar, err = MapBAR(r.o.Root, f.BDF, 0); err != nil {
		return err
	}
	defer r.release()
	boot0, err := r.alive()
	if err != nil {
		return err
	}
	r.rep.Boot0 = fmt.Sprintf("%#08x", boot0)
	if err := r.latency(); err != nil {
		return err
	}
	if r.host, err = NewHost(r.bar, HugePage); err != nil {
		return err
	}
	if r.ch, err = gpudrv.OpenChannel(r.host, 0, r.o.Channel, gpudrv.ChannelConfig{}); err != nil {
		return err
	}
	if err := r.copies(ctx); err != nil {
		return err
	}
	if err := r.launch(ctx); err != nil {
		return err
	}
	r.event("done")
	r.release() // nothing of the device stays mapped while it goes
	if r.o.WaitRemoval > 0 {
		return r.waitRemoval(ctx)
	}
	return nil
}

// release unmaps BAR0 and the driver's memory.
func (r *runner) release() {
	if r.host != nil {
		_ = r.host.Close()
		r.host = nil
	}
	if r.bar != nil {
		_ = r.bar.Close()
		r.bar = nil
	}
}

// find returns the GPU's function, waiting up to WaitDevice for it.
func (r *runner) find(ctx context.Context) (Function, error) {
	deadline := time.Now().Add(r.o.WaitDevice)
	r.event("looking", "vendor", r.o.Vendor)
	for {
		fns, err := List(r.o.Root)
		if err != nil && !errors.Is(err, ErrNoDevice) { // one vanishing mid-listing is retried
			return Function{}, err
		}
		if err == nil {
			r.rep.PCI = fns
			for _, f := range fns {
				if f.Vendor == r.o.Vendor && (r.o.Device == "" || f.Device == r.o.Device) {
					return f, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return Function{}, fmt.Errorf("%w: none with vendor %s device %q among %d functions", ErrNoDevice, r.o.Vendor, r.o.Device, len(fns))
		}
		if err := pause(ctx, 20*time.Millisecond); err != nil {
			return Function{}, err
		}
	}
}

func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// alive reads BOOT_0: all ones means the device is gone.
func (r *runner) alive() (uint32, error) {
	v, err := r.bar.Read32(gpu.RegBoot0)
	if err != nil {
		return 0, err
	}
	if v == 0xffff_ffff {
		return v, fmt.Errorf("%w: BOOT_0 of %s", ErrDeviceGone, r.rep.GPU)
	}
	return v, nil
}

// latency times MMIO reads of BOOT_0 and of SCRATCH, after checking that
// SCRATCH holds what is written to it.
func (r *runner) latency() error {
	const probe = 0x5a5a_c3c3
	if err := r.bar.Write32(gpu.RegScratch, probe); err != nil {
		return err
	}
	if v, err := r.bar.Read32(gpu.RegScratch); err != nil || v != probe {
		if v == 0xffff_ffff {
			return fmt.Errorf("%w: SCRATCH of %s", ErrDeviceGone, r.rep.GPU)
		}
		return fmt.Errorf("guest: SCRATCH reads %#x after writing %#x (%v)", v, probe, err)
	}
	n := r.o.Samples
	r.rep.MMIOReadUS.Samples = n
	for _, m := range []struct {
		reg uint64
		dst *float64
	}{{gpu.RegBoot0, &r.rep.MMIOReadUS.Boot0}, {gpu.RegScratch, &r.rep.MMIOReadUS.Scratch}} {
		t0 := time.Now()
		for range n {
			if v, _ := r.bar.Read32(m.reg); v == 0xffff_ffff {
				return fmt.Errorf("%w: register %#x of %s", ErrDeviceGone, m.reg, r.rep.GPU)
			}
		}
		*m.dst = float64(time.Since(t0).Microseconds()) / float64(n)
	}
	return nil
}

// copies moves Bytes of a pattern to the GPU's memory and back, and
// compares.
func (r *runner) copies(ctx context.Context) error {
	src, err := AllocDMA(r.o.Bytes)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := AllocDMA(r.o.Bytes)
	if err != nil {
		return err
	}
	defer dst.Close()
	r.host.Register(src)
	r.host.Register(dst)
	fillPattern(src.Bytes()[:r.o.Bytes], uint64(time.Now().UnixNano())|1)
	r.rep.Bytes = r.o.Bytes
	r.rep.SrcCRC32C = fmt.Sprintf("%#08x", crc32.Checksum(src.Bytes()[:r.o.Bytes], crc32.MakeTable(crc32.Castagnoli)))

	r.event("copying", "dir", "h2d", "bytes", r.o.Bytes)
	secs, n, err := r.copy(ctx, src, gpu.DirH2D)
	if err != nil {
		return fmt.Errorf("host-to-device copy: %w", err)
	}
	r.rep.H2DOK, r.rep.Chunks = true, n
	r.rep.H2DGbps = float64(r.o.Bytes) * 8 / secs / 1e9

	r.event("copying", "dir", "d2h", "bytes", r.o.Bytes)
	if secs, _, err = r.copy(ctx, dst, gpu.DirD2H); err != nil {
		return fmt.Errorf("device-to-host copy: %w", err)
	}
	r.rep.D2HGbps = float64(r.o.Bytes) * 8 / secs / 1e9
	r.rep.D2HOK = bytes.Equal(src.Bytes()[:r.o.Bytes], dst.Bytes()[:r.o.Bytes])
	if !r.rep.D2HOK {
		return fmt.Errorf("guest: the %d bytes read back differ from those sent, first at byte %d", r.o.Bytes, firstDiff(src.Bytes(), dst.Bytes()))
	}
	return nil
}

// copy moves buf's first Bytes between host memory and VRAM offset 0, one
// COPY command per physically contiguous chunk, and waits for it.
func (r *runner) copy(ctx context.Context, buf *DMA, dir uint32) (float64, int, error) {
	chs, err := buf.Chunks(0, r.o.Bytes)
	if err != nil {
		return 0, 0, err
	}
	cmds := make([]gpu.Command, len(chs))
	for i, c := range chs {
		cmds[i] = gpu.Command{Op: gpu.OpCopy, Src: c.Bus, Dst: c.Off, Len: c.Len, Dir: dir, Marker: uint32(i)}
		if dir == gpu.DirD2H {
			cmds[i].Src, cmds[i].Dst = c.Off, c.Bus
		}
	}
	t0 := time.Now()
	if err := r.submitWait(ctx, cmds...); err != nil {
		return 0, 0, err
	}
	return time.Since(t0).Seconds(), len(chs), nil
}

// launch runs a 1 ms kernel and synchronizes with it.
func (r *runner) launch(ctx context.Context) error {
	r.event("launching")
	if err := r.submitWait(ctx, gpu.Command{Op: gpu.OpKernel, Duration: uint64(time.Millisecond), Marker: 0x4b}); err != nil {
		return fmt.Errorf("kernel launch: %w", err)
	}
	r.rep.LaunchSyncOK = true
	return nil
}

// submitWait submits cmds and polls the channel's semaphore in host
// memory (no interrupts reach the guest) until they are done, checking
// every 250 ms that the device still answers (each check is an MMIO read
// that waits behind the GPU's posted writes: not too often).
func (r *runner) submitWait(ctx context.Context, cmds ...gpu.Command) error {
	done, err := r.ch.Completed()
	if err != nil {
		return err
	}
	seq, err := r.ch.Submit(done, cmds...)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(r.o.Timeout)
	check := time.Now()
	for {
		if done, err = r.ch.Completed(); err != nil {
			return err
		}
		if done >= seq {
			// Released: the work ran. A fault stops the channel before
			// the sequence (the check below finds its errors); a non-zero
			// count here is a fault after the release, still reported.
			if e, err := r.bar.Read32(gpu.ChannelReg(r.o.Channel, gpu.ChErrors)); err != nil {
				return err
			} else if e == 0xffff_ffff {
				return fmt.Errorf("%w: channel %d ERRORS of %s", ErrDeviceGone, r.o.Channel, r.rep.GPU)
			} else if e != 0 {
				return fmt.Errorf("guest: channel %d reports %d errors (a DMA read failed: a completion timeout or abort)", r.o.Channel, e)
			}
			return nil
		}
		if now := time.Now(); now.Sub(check) > 250*time.Millisecond {
			check = now
			if _, err := r.alive(); err != nil {
				return err
			}
			if e, _ := r.bar.Read32(gpu.ChannelReg(r.o.Channel, gpu.ChErrors)); e == 0xffff_ffff {
				return fmt.Errorf("%w: channel %d ERRORS of %s", ErrDeviceGone, r.o.Channel, r.rep.GPU)
			} else if e != 0 {
				return fmt.Errorf("guest: channel %d reports %d errors", r.o.Channel, e)
			}
			if now.After(deadline) {
				return fmt.Errorf("%w: sequence %d not released within %s (last %d)", ErrTimeout, seq, sim.FormatDuration(r.o.Timeout), done)
			}
		}
		if err := pause(ctx, 50*time.Microsecond); err != nil {
			return err
		}
	}
}

// waitRemoval waits for the GPU's sysfs directory to go.
func (r *runner) waitRemoval(ctx context.Context) error {
	deadline := time.Now().Add(r.o.WaitRemoval)
	for {
		if _, err := os.Stat(filepath.Join(r.o.Root, r.rep.GPU)); errors.Is(err, os.ErrNotExist) {
			r.rep.Removed = true
			r.event("removed", "bdf", r.rep.GPU)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("guest: %s still present %s after the work", r.rep.GPU, sim.FormatDuration(r.o.WaitRemoval))
		}
		if err := pause(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// fillPattern writes a xorshift64 sequence seeded by seed: every 8-byte
// word differs, so a misplaced or stale chunk shows.
func fillPattern(b []byte, seed uint64) {
	x := seed
	for i := 0; i+8 <= len(b); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(b[i:], x)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
