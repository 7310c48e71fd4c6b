package e2ebench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/dxpu/dxpu/emu/gpudrv"
	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/app/bytesize"
	"github.com/dxpu/dxpu/internal/app/progress"
	"github.com/dxpu/dxpu/internal/app/rawgoodput"
	"github.com/dxpu/dxpu/internal/app/units"
)

// Options configures a run.
type Options struct {
	// Loopback runs both ends on 127.0.0.1 instead of in network
	// namespaces behind the XDP switch (which needs root).
	Loopback bool
	// Sizes are the copy sizes in bytes (default 64 KiB, 256 KiB, ...
	// 64 MiB).
	Sizes []uint64
	// Samples is how many MMIO reads and echoes are timed (default 2000);
	// DMA reads and launches take a quarter as many.
	Samples int
	// Copies is how many times each size is copied each way; the median
	// rate is reported (default 3).
	Copies int
	// LinkFor is how long the link's goodput is measured (default 1s).
	LinkFor time.Duration
	// MTU of the bridges (default 9000 on loopback, 1472 in namespaces:
	// their veths carry 1500-byte packets).
	MTU int
	// NoBatch sends each TLP to the bridge as the simulation produces it,
	// instead of packing each moment's TLPs into as few frames as fit
	// (the default of realtime.UDPPath).
	NoBatch bool
	// NoBusyPoll leaves receiving to the bridges' goroutines instead of
	// the spinning clock polling their sockets (realtime.UDPPath).
	NoBusyPoll bool
	// OneClock runs the emulated host and GPU on one clock (one
	// goroutine). By default, behind the fabric, each side has a clock
	// and goroutine of its own, as a host and a GPU box are two machines:
	// the host's bridge and memory on one core, the GPU's bridge and copy
	// engines on another, like the raw baselines' two sockets.
	OneClock bool
	// Spin is how long each clock polls after its last piece of work
	// before it sleeps (realtime.Clock.Spin; default 2ms): each side
	// polls its socket as a kernel-bypass bridge on a core of its own
	// does. At the clock's own 100us a side that waited that long for
	// frames (the GPU between bursts of completions) went to sleep and was
	// woken by its runner's goroutine: 64 MiB copies ran at a third of
	// the rate.
	Spin time.Duration
	// ProfileDir, when set, receives pprof profiles of the run: a CPU
	// profile per phase (latency.cpu.pprof, copy.cpu.pprof) and the
	// mutex and block profiles of the whole run.
	ProfileDir string
	// Log receives progress (default: discarded).
	Log *slog.Logger
	// Progress, when a terminal, shows the phase running and the copies
	// done (package progress; nothing elsewhere).
	Progress io.Writer
}

// clocks is how many clocks run the world behind the fabric.
func clocks(o Options) int {
	if o.OneClock {
		return 1
	}
	return 2
}

func (o *Options) defaults() error {
	if len(o.Sizes) == 0 {
		for s := uint64(64 << 10); s <= 64<<20; s *= 4 {
			o.Sizes = append(o.Sizes, s)
		}
	}
	for _, s := range o.Sizes {
		if s == 0 || s > 1<<30 || s%4 != 0 {
			return fmt.Errorf("--sizes: copy size %s: want a multiple of 4 in 4..1GiB", bytesize.Format(s))
		}
	}
	if o.Samples == 0 {
		o.Samples = 2000
	}
	if o.Copies == 0 {
		o.Copies = 3
	}
	if o.LinkFor == 0 {
		o.LinkFor = time.Second
	}
	if o.Spin == 0 {
		o.Spin = 2 * time.Millisecond
	}
	if o.MTU == 0 {
		o.MTU = 1472
		if o.Loopback {
			o.MTU = 9000
		}
	}
	switch {
	case o.Samples < 4:
		return fmt.Errorf("--samples %d: want at least 4", o.Samples)
	case o.Copies < 1:
		return fmt.Errorf("--copies %d: want at least 1", o.Copies)
	case o.Spin < 0:
		return units.Errorf("--spin %v: want a positive duration", o.Spin)
	case o.LinkFor < 0:
		return units.Errorf("--link-for %v: want a positive duration", o.LinkFor)
	case o.MTU < 576 || o.MTU > 65000:
		return fmt.Errorf("--mtu %d: want 576..65000", o.MTU)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return nil
}

// Result is what a run measured; times in microseconds, rates in Gbit/s.
type Result struct {
	Mode               string  `json:"mode"` // "loopback" or "netns"
	EchoP50Us          float64 `json:"echo_p50_us"`
	EchoP99Us          float64 `json:"echo_p99_us"`
	MMIOReadP50Us      float64 `json:"mmio_read_p50_us"`
	MMIOReadP99Us      float64 `json:"mmio_read_p99_us"`
	DMAReadP50Us       float64 `json:"dma_read_p50_us"`
	DMAReadP99Us       float64 `json:"dma_read_p99_us"`
	LaunchSyncUs       float64 `json:"launch_sync_us"`
	NativeLaunchSyncUs float64 `json:"native_launch_sync_us"`
	NativeMMIOReadUs   float64 `json:"native_mmio_read_us"`
	Copies             []Copy  `json:"copies"` // in the order of Options.Sizes
	LinkGoodputGbps    float64 `json:"link_goodput_gbps"`
	CPUSecondsPerGB    float64 `json:"cpu_s_per_gb"`
	Ratios             Ratios  `json:"ratios"`
	MTU                int     `json:"mtu_bytes"`

	// LaunchSyncUs and NativeLaunchSyncUs place the commands in device
	// memory (written through BAR1, fetched by the GPU locally: one round
	// trip per launch+sync over the fabric); these two place them in host
	// memory (the GPU fetches them by DMA reads: three round trips).
	LaunchSyncHostCmdsUs       float64 `json:"launch_sync_host_cmds_us"`
	NativeLaunchSyncHostCmdsUs float64 `json:"native_launch_sync_host_cmds_us"`

	// The echo again between two busy-polling sockets (outside Go's
	// network poller, each end spinning: no wake-up on either end), the
	// socket kind and polling the measured bridges use: the stricter
	// baseline. The targets are stated against the plain echo above.
	EchoBusyPollP50Us float64 `json:"echo_busy_poll_p50_us"`
	EchoBusyPollP99Us float64 `json:"echo_busy_poll_p99_us"`

	// Clocks is 2 when the emulated host and GPU each ran on a clock and
	// goroutine of their own (the default), 1 with OneClock.
	Clocks int `json:"clocks"`

	// The raw baselines: two plain UDP sockets at the bridges' endpoints,
	// on their path (through the switch in namespaces), flooded with
	// datagrams of the bridges' MTU (sendmmsg/recvmmsg, in this process)
	// for half of LinkFor each, just before the world over the pair starts
	// (UDPBeforeGbps; its clocks spin while it lives) and just after the
	// link pair (UDPAfterGbps): a rawgoodput.Bracket, whose mean
	// (UDPGoodputGbps) the ratios use and whose Drift says when the run is
	// not to be compared. Sent and received are the two floods' sums. Then,
	// for LinkFor each, UDP with the link's mean frame and, on loopback,
	// one TCP connection.
	UDPBeforeGbps    float64 `json:"udp_before_gbps"`
	UDPAfterGbps     float64 `json:"udp_after_gbps"`
	UDPDrift         float64 `json:"udp_drift_ratio"`
	UDPGoodputGbps   float64 `json:"udp_goodput_gbps"`
	UDPDatagramBytes int     `json:"udp_datagram_bytes"`
	UDPSent          uint64  `json:"udp_datagrams_sent"`
	UDPReceived      uint64  `json:"udp_datagrams_received"`
	TCPGoodputGbps   float64 `json:"tcp_goodput_gbps,omitempty"`
	// The link pair's mean frame (the host side's bytes sent over frames
	// sent) and UDP again with datagrams of that size.
	LinkFrameBytes    int     `json:"link_frame_bytes"`
	UDPSameFramesGbps float64 `json:"udp_same_frames_goodput_gbps"`
}

// Copy is one copy size's median rate each way, in Gbit/s.
type Copy struct {
	SizeBytes uint64  `json:"size_bytes"`
	H2DGbps   float64 `json:"h2d_gbps"`
	D2HGbps   float64 `json:"d2h_gbps"`
}

// largest is the copy of the largest size (the last of them), or a zero
// Copy when there is none.
func (r Result) largest() Copy {
	var c Copy
	for _, x := range r.Copies {
		if x.SizeBytes >= c.SizeBytes {
			c = x
		}
	}
	return c
}

// Ratios are the figures against their baselines, as the targets state
// them: MMIO read p50 <= 1.5 and p99 <= 2 times the echo's; launch+sync
// within native + 2 echo p50s (LaunchSyncExcess <= 2, the commands in
// device memory as a driver for fabric-attached GPUs places them); the
// largest copy >= 0.5 of the link's goodput each way.
type Ratios struct {
	MMIOP50OverEcho  float64 `json:"mmio_p50_over_echo_p50"`
	MMIOP99OverEcho  float64 `json:"mmio_p99_over_echo_p99"`
	LaunchSyncExcess float64 `json:"launch_sync_minus_native_over_echo_p50"`
	H2DOverLink      float64 `json:"h2d_largest_over_link"`
	D2HOverLink      float64 `json:"d2h_largest_over_link"`

	// LaunchSyncHostCmdsExcess is LaunchSyncExcess with the commands in
	// host memory.
	LaunchSyncHostCmdsExcess float64 `json:"launch_sync_host_cmds_minus_native_over_echo_p50"`
	// MMIO read against the busy-polling echo.
	MMIOP50OverBusyPollEcho float64 `json:"mmio_p50_over_echo_busy_poll_p50"`
	MMIOP99OverBusyPollEcho float64 `json:"mmio_p99_over_echo_busy_poll_p99"`

	// Against raw UDP on the same path (targets: the lossless pair >=
	// 0.8, the largest copy >= 0.7 each way) and, on loopback, TCP.
	PairOverUDP float64 `json:"pair_over_udp"`
	H2DOverUDP  float64 `json:"h2d_largest_over_udp"`
	D2HOverUDP  float64 `json:"d2h_largest_over_udp"`
	PairOverTCP float64 `json:"pair_over_tcp,omitempty"`
	// The link pair against UDP with datagrams of its mean frame.
	PairOverUDPSameFrames float64 `json:"pair_over_udp_same_frames"`
}

// Run performs one measurement.
func Run(ctx context.Context, o Options) (res Result, err error) {
	if err := o.defaults(); err != nil {
		return Result{}, apperr.Usage(err)
	}
	var prof *profiler
	if o.ProfileDir != "" {
		if prof, err = newProfiler(o.ProfileDir); err != nil {
			return Result{}, apperr.Usage(err)
		}
		defer func() {
			if perr := prof.finish(); err == nil {
				err = perr
			}
		}()
	}
	var net network
	if o.Loopback {
		net = loopbackNet{}
	} else {
		net, err = newNamespaces(ctx, o.MTU, o.Log)
	}
	if err != nil {
		return Result{}, apperr.Usage(err) // not root, or no namespaces here: nothing ran
	}
	defer net.close()
	defer func() {
		// Set up, it ran: what fails from here on failed the run (exit
		// status 1), an interrupt aside.
		if err != nil && ctx.Err() == nil {
			err = apperr.Failed(err)
		}
	}()
	res = Result{Mode: net.name(), MTU: o.MTU, Clocks: clocks(o), Copies: make([]Copy, len(o.Sizes))}
	for i, size := range o.Sizes {
		res.Copies[i].SizeBytes = size
	}
	cfg := bridgeConfig(o.MTU)
	maxCopy := slices.Max(o.Sizes)
	// Steps: two echoes, native, MMIO reads, DMA reads, launches, each
	// copy, the link.
	bar := progress.New(o.Progress, 6+2*len(o.Sizes)*o.Copies+1, "busy-poll echo")
	defer bar.Finish()
	// On a terminal the bar shows the phases; the log has them at debug
	// level (--verbose) so they do not tear the bar.
	info := o.Log.Info
	if bar != nil {
		info = o.Log.Debug
	}

	info("e2ebench: busy-poll echo", "mode", res.Mode, "samples", o.Samples)
	busy, err := net.busyEcho()
	if err != nil {
		return res, err
	}
	echo, err := echoRTTs(ctx, busy, o.Samples)
	busy.close()
	if err != nil {
		return res, err
	}
	res.EchoBusyPollP50Us, res.EchoBusyPollP99Us = quantileUs(echo, 0.5), quantileUs(echo, 0.99)
	// The plain echo, the targets' baseline, is timed in turns with the
	// MMIO reads (world.mmioReadsBeside).
	plain, err := net.echo()
	if err != nil {
		return res, err
	}
	defer plain.close()

	bar.Add(1)
	bar.Describe("native world")
	info("e2ebench: native world")
	native, err := newWorld(nil, cfg, 4096, o)
	if err != nil {
		return res, err
	}
	nm, err := native.mmioReads(o.Samples / 4)
	if err == nil {
		var nl [][]time.Duration
		if nl, err = native.launchSyncs(o.Samples/4, gpudrv.DeviceMemory, gpudrv.HostMemory); err == nil {
			res.NativeMMIOReadUs, res.NativeLaunchSyncUs = quantileUs(nm, 0.5), quantileUs(nl[0], 0.5)
			res.NativeLaunchSyncHostCmdsUs = quantileUs(nl[1], 0.5)
		}
	}
	native.close()
	if err != nil {
		return res, fmt.Errorf("native: %w", err)
	}

	flood := func(size int, d time.Duration) (rawgoodput.UDPResult, error) {
		o.Log.Info("e2ebench: raw UDP goodput", "for", d, "datagram_bytes", size)
		htx, grx, prefix, err := net.raw()
		if err != nil {
			return rawgoodput.UDPResult{}, err
		}
		u, err := rawgoodput.UDP(ctx, htx, grx, max(size, len(prefix)), prefix, d)
		if err != nil {
			return u, fmt.Errorf("e2ebench: %w", err)
		}
		return u, nil
	}
	// Before the world over the pair: its clocks spin while it lives.
	half := max(o.LinkFor/2, time.Millisecond)
	before, err := flood(o.MTU, half)
	if err != nil {
		return res, err
	}
	bar.Add(1)
	bar.Describe("MMIO reads and echoes")
	info("e2ebench: world over the bridge pair")
	// The measured path's sockets stay out of the runtime's poller
	// while the clock polls them (udp.ListenBusyPoll); the link's pair
	// runs on its runners' goroutines, as `dxpu bench link` does.
	wd, err := newWorld(func() (driver.Transport, driver.Transport, error) { return net.bridges(!o.NoBusyPoll) }, cfg, maxCopy, o)
	if err != nil {
		return res, err
	}
	defer wd.close()
	if err := prof.start("latency"); err != nil {
		return res, err
	}
	info("e2ebench: MMIO reads and echoes in turns", "samples", o.Samples)
	mm, echo, err := wd.mmioReadsBeside(newEchoTimer(plain), o.Samples)
	if err != nil {
		return res, err
	}
	res.EchoP50Us, res.EchoP99Us = quantileUs(echo, 0.5), quantileUs(echo, 0.99)
	res.MMIOReadP50Us, res.MMIOReadP99Us = quantileUs(mm, 0.5), quantileUs(mm, 0.99)
	bar.Add(2)
	bar.Describe("DMA reads")
	dr, err := wd.dmaReads(o.Samples / 4)
	if err != nil {
		return res, err
	}
	res.DMAReadP50Us, res.DMAReadP99Us = quantileUs(dr, 0.5), quantileUs(dr, 0.99)
	bar.Add(1)
	bar.Describe("launch+sync")
	ls, err := wd.launchSyncs(o.Samples/4, gpudrv.DeviceMemory, gpudrv.HostMemory)
	if err != nil {
		return res, err
	}
	res.LaunchSyncUs, res.LaunchSyncHostCmdsUs = quantileUs(ls[0], 0.5), quantileUs(ls[1], 0.5)

	if err := prof.start("copy"); err != nil {
		return res, err
	}
	bar.Add(1)
	cpu0 := cpuTime()
	var moved uint64
	for _, dir := range []direction{h2d, d2h} {
		for i, size := range o.Sizes {
			var rs []float64
			for range o.Copies {
				if err := ctx.Err(); err != nil {
					return res, err
				}
				bar.Describe(fmt.Sprintf("%s copies of %s", dir, bytesize.Format(size)))
				el, err := wd.copyTime(dir, size)
				if err != nil {
					return res, err
				}
				moved += size
				bar.Add(1)
				rs = append(rs, float64(size)*8/el.Seconds()/1e9)
			}
			slices.Sort(rs)
			if dir == h2d {
				res.Copies[i].H2DGbps = rs[len(rs)/2]
			} else {
				res.Copies[i].D2HGbps = rs[len(rs)/2]
			}
			info("e2ebench: copy", "dir", dir.String(), "bytes", size, "gbps", rs[len(rs)/2])
		}
	}
	res.CPUSecondsPerGB = (cpuTime() - cpu0).Seconds() / (float64(moved) / 1e9)
	wd.close()

	bar.Describe("link goodput")
	info("e2ebench: link goodput", "for", o.LinkFor)
	if err := prof.start("link"); err != nil {
		return res, err
	}
	if res.LinkGoodputGbps, res.LinkFrameBytes, err = linkGoodput(ctx, func() (driver.Transport, driver.Transport, error) { return net.bridges(false) }, cfg, o.LinkFor, o.Spin); err != nil {
		return res, err
	}
	after, err := flood(o.MTU, half)
	if err != nil {
		return res, err
	}
	res.UDPBeforeGbps, res.UDPAfterGbps = before.GoodputGbps, after.GoodputGbps
	br := rawgoodput.Bracket{Before: before, After: after}
	res.UDPGoodputGbps, res.UDPDrift = br.GoodputGbps(), br.Drift()
	res.UDPDatagramBytes, res.UDPSent, res.UDPReceived = after.DatagramBytes, before.Sent+after.Sent, before.Received+after.Received
	if res.LinkFrameBytes > 0 {
		u, err := flood(res.LinkFrameBytes, o.LinkFor)
		if err != nil {
			return res, err
		}
		res.UDPSameFramesGbps = u.GoodputGbps
	}
	if o.Loopback {
		if res.TCPGoodputGbps, err = rawgoodput.TCPLoopback(ctx, o.LinkFor); err != nil {
			return res, fmt.Errorf("e2ebench: %w", err)
		}
	}
	big := res.largest()
	res.Ratios = Ratios{
		MMIOP50OverEcho:  res.MMIOReadP50Us / res.EchoP50Us,
		MMIOP99OverEcho:  res.MMIOReadP99Us / res.EchoP99Us,
		LaunchSyncExcess: (res.LaunchSyncUs - res.NativeLaunchSyncUs) / res.EchoP50Us,
		H2DOverLink:      big.H2DGbps / res.LinkGoodputGbps,
		D2HOverLink:      big.D2HGbps / res.LinkGoodputGbps,
	}
	res.Ratios.LaunchSyncHostCmdsExcess = (res.LaunchSyncHostCmdsUs - res.NativeLaunchSyncHostCmdsUs) / res.EchoP50Us
	res.Ratios.MMIOP50OverBusyPollEcho = res.MMIOReadP50Us / res.EchoBusyPollP50Us
	res.Ratios.MMIOP99OverBusyPollEcho = res.MMIOReadP99Us / res.EchoBusyPollP99Us
	res.Ratios.PairOverUDP = res.LinkGoodputGbps / res.UDPGoodputGbps
	res.Ratios.H2DOverUDP = big.H2DGbps / res.UDPGoodputGbps
	res.Ratios.D2HOverUDP = big.D2HGbps / res.UDPGoodputGbps
	if res.UDPSameFramesGbps > 0 {
		res.Ratios.PairOverUDPSameFrames = res.LinkGoodputGbps / res.UDPSameFramesGbps
	}
	if res.TCPGoodputGbps > 0 {
		res.Ratios.PairOverTCP = res.LinkGoodputGbps / res.TCPGoodputGbps
	}
	return res, nil
}

// quantileUs returns the q-quantile of d in microseconds.
func quantileUs(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[int(q*float64(len(s)-1))]) / 1e3
}

// cpuTime returns the CPU time (user and system) the process used so far.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
