package bridged

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/afpacket"
	"github.com/dxpu/dxpu/bridge/afxdp"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/bridge/nettlpside"
	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/bridge/udp"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/realtime"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/app/httpguard"
	"github.com/dxpu/dxpu/internal/app/units"
	"github.com/dxpu/dxpu/tlp"
)

// Options is one bridge daemon's configuration.
type Options struct {
	Role         bridge.Role
	Pair         uint32
	Listen, Peer netip.AddrPort // UDP: this bridge, the peer bridge
	PCIe         PCIe
	Metrics      string // TCP address for /metrics ("": none)
	// MetricsServer bounds the /metrics server (zero fields:
	// httpguard.MetricsDefaults).
	MetricsServer httpguard.Config

	// EtherIface and EtherPeer, when set, carry the frames over raw
	// Ethernet (EtherType 0x88b5, AF_PACKET, CAP_NET_RAW) on EtherIface to
	// the peer's MAC instead of UDP.
	EtherIface string
	EtherPeer  net.HardwareAddr
	// EtherDriver is how raw Ethernet frames move: EtherAFPacket (also
	// "") or EtherAFXDP (an AF_XDP socket and an XDP program on
	// EtherIface: kernel bypass, zero-copy where the NIC's driver offers
	// it).
	EtherDriver string

	// Key is the pair key (32 bytes, both sides the same); KeyGeneration
	// numbers it and SealMode picks GCM or GMAC. Without a key the daemon
	// refuses to run unless Insecure says so (a lab).
	Key           []byte
	KeyGeneration uint32
	SealMode      seal.Mode
	Insecure      bool
	// KeyLog, when set, receives the pair's traffic secrets
	// (bridge.Config.KeyLog; `--key-log`).
	KeyLog func(seal.Secret)
	// MTU is the largest frame from the dxpu header on (0: 1472, a
	// 1500-byte Ethernet MTU less IPv4 and UDP); MaxPayload the largest
	// TLP payload this side sends and takes (0: 512): the peer's must be
	// at least what this side's PCIe side sends.
	MTU, MaxPayload int
	// MPS is a memory side's Max Payload Size, the most data one of its
	// completions carries (0: 256); at most MaxPayload.
	MPS int
	// Window is the TLPs in flight per direction: the retransmit window
	// and the reorder window offered to the peer, rounded up to a power
	// of two (0: bridge.DefaultWindow). Credits is the header credits
	// each flow-control class advertises to the peer, its receive buffer
	// in TLPs, with Credits*MaxPayload/16 data units (0:
	// bridge.DefaultHeaderCredits). At most bridge.MaxWindow and
	// bridge.MaxHeaderCredits; see SetBuffers.
	Window, Credits   int
	Keepalive         time.Duration
	DeadAfter         time.Duration
	CompletionTimeout time.Duration
	// Spin: the runner polls its socket this long after its last frames
	// before it sleeps (driver.Runner.Spin; 0: at once).
	Spin             time.Duration
	GPUModel         gpu.Model // of an emu-gpu side
	MemBase, MemSize uint64    // of a memory side
	// Doorbell, when set, puts the test target of docs/protocol.md
	// (section 12.1) at this address of a memory side: commands written
	// there make the device issue requests toward the host side.
	Doorbell *uint64
	Log      *slog.Logger
	// Ready, when set, is called once everything is bound and running.
	Ready func(*Daemon)
}

// MaxPair is the largest pair ID (24 bits); 0 is never a pair's.
const MaxPair = 1<<24 - 1

// Ethernet drivers (Options.EtherDriver, --ether-driver).
const (
	EtherAFPacket = "afpacket"
	EtherAFXDP    = "afxdp"
)

// Daemon is what a running bridge holds.
type Daemon struct {
	runner      *driver.Runner
	host        *nettlpside.Host
	gpu         *realtime.BridgedGPU
	mem         *nettlpside.MemoryDevice
	metricsAddr net.Addr
}

// State is the pair's link state as this side sees it.
func (d *Daemon) State() bridge.State { return d.runner.State() }

// MetricsAddr is where /metrics is served (nil without Options.Metrics).
func (d *Daemon) MetricsAddr() net.Addr { return d.metricsAddr }

// DefaultCompletionTimeout is the completion timeout of a daemon not given
// one: on the host side 250 ms, below the 500 ms a NetTLP host (libtlp)
// waits, so that the bridge's CA reaches it first; on the GPU side twice
// deadAfter (bridge.Config's default when 0), so that an outage shorter
// than DeadAfter, which the link hides (LNK-3), stays hidden from the
// GPU's DMA reads too.
func DefaultCompletionTimeout(role bridge.Role, deadAfter time.Duration) time.Duration {
	if role == bridge.RoleHost {
		return 250 * time.Millisecond
	}
	if deadAfter <= 0 {
		deadAfter = bridge.Config{}.Defaults().DeadAfter
	}
	return 2 * deadAfter
}

// bridgeConfig is the configuration of the daemon's bridge (Run has
// checked the options and set the completion timeout).
func (o *Options) bridgeConfig() bridge.Config {
	c := bridge.Config{Role: o.Role, PairID: o.Pair, MTU: o.MTU, MaxPayload: o.MaxPayload, Keepalive: o.Keepalive, DeadAfter: o.DeadAfter,
		CompletionTimeout: o.CompletionTimeout, MaxRTO: max(20*time.Millisecond, o.DeadAfter/5),
		Key: o.Key, KeyGeneration: o.KeyGeneration, SealMode: o.SealMode, RequireKeys: !o.Insecure,
		KeyLog: o.KeyLog}
	SetBuffers(&c, o.Window, o.Credits)
	return c
}

// Run runs one bridge with its PCIe side until ctx ends; then it returns
// nil, or the error that stopped the runner or the PCIe side. Options
// that do not fit together are apperr.ErrUsage.
func Run(ctx context.Context, o Options) error {
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	switch {
	case o.Role == bridge.RoleHost && o.PCIe.Kind != KindNetTLP:
		return apperr.Usage(fmt.Errorf("--role host takes --pcie nettlp:LOCAL:REMOTE, not %q", o.PCIe.Kind))
	case o.Role == bridge.RoleGPU && o.PCIe.Kind != KindEmuGPU && o.PCIe.Kind != KindMemory:
		return apperr.Usage(fmt.Errorf("--role gpu takes --pcie emu-gpu or memory (a NetTLP adapter is the host's side)"))
	}
	if o.Pair == 0 || o.Pair > MaxPair {
		return apperr.Usage(fmt.Errorf("--pair %d: want 1..%d (24 bits; 0 is no pair)", o.Pair, MaxPair))
	}
	if o.Spin < 0 || o.Spin > driver.MaxSpin {
		return apperr.Usage(units.Errorf("--spin %v: want 0 up to %v", o.Spin, driver.MaxSpin))
	}
	if o.Metrics != "" {
		if err := httpguard.CheckListenAddr("metrics", o.Metrics); err != nil {
			return err
		}
	}
	def := bridge.Config{}.Defaults()
	if err := (Timers{Keepalive: o.Keepalive, DeadAfter: o.DeadAfter, CompletionTimeout: o.CompletionTimeout,
		DefaultKeepalive: def.Keepalive, DefaultDeadAfter: def.DeadAfter}).Check(); err != nil {
		return apperr.Usage(err)
	}
	if o.CompletionTimeout == 0 {
		o.CompletionTimeout = DefaultCompletionTimeout(o.Role, o.DeadAfter)
	}
	if len(o.Key) == 0 && !o.Insecure {
		return apperr.Usage(fmt.Errorf("a daemon seals its pair's frames: give the pair key (--key-file), or --insecure-no-keys for a lab"))
	}
	b, err := bridge.New(o.bridgeConfig())
	if err != nil {
		return apperr.Usage(NameFlag(err, map[string]string{"MTU": fmt.Sprintf("--mtu %d", o.MTU),
			"MaxPayload": fmt.Sprintf("--max-payload %d", o.MaxPayload), "Key": "--key-file",
			"Window": fmt.Sprintf("--window %d", o.Window), "Credits": fmt.Sprintf("--credits %d", o.Credits)}))
	}
	var conn driver.Transport
	switch {
	case o.EtherIface != "" && o.EtherDriver == EtherAFXDP:
		var x *afxdp.Conn
		if x, err = afxdp.Listen(o.EtherIface, o.EtherPeer, afxdp.Config{}); err == nil {
			o.Log.Info("AF_XDP socket bound", "iface", o.EtherIface, "mode", x.Mode())
			conn = x
		}
	case o.EtherIface != "":
		conn, err = afpacket.Listen(o.EtherIface, o.EtherPeer)
	default:
		conn, err = udp.Listen(o.Listen, o.Peer)
	}
	if err != nil {
		return err
	}
	if m, ok := conn.(interface{ MTU() int }); ok && b.Config().MTU > m.MTU() {
		conn.Close()
		return apperr.Usage(fmt.Errorf("--mtu %d: %s carries frames of at most %d bytes", b.Config().MTU, o.EtherIface, m.MTU()))
	}
	d := &Daemon{runner: driver.New(b, conn)}
	d.runner.Spin = o.Spin
	events := newEventLog(o.Log, o.Pair, o.Role, nil)
	d.runner.OnEvent = events.log
	d.runner.OnLate = NewLateLog(o.Log).For("pair", o.Pair, "role", o.Role)
	side, err := d.pcieSide(&o)
	if err != nil {
		conn.Close()
		return err
	}
	// Warn once the options are known good and the sockets bound: a
	// usage error (--mem-size 0, an address in use) is one line.
	if o.Insecure && len(o.Key) == 0 {
		o.Log.Warn("running unkeyed (--insecure-no-keys): anyone on the fabric who knows the pair ID can inject TLPs")
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var srv *httpguard.Server
	if o.Metrics != "" {
		ln, err := httpguard.Listen("metrics", o.Metrics)
		if err != nil {
			conn.Close()
			return err
		}
		d.metricsAddr = ln.Addr()
		srv = httpguard.ServeMetrics("bridge metrics", ln, d.registry(&o), o.MetricsServer, o.Log)
	}

	var wg sync.WaitGroup
	wg.Go(func() { events.limit.Run(ctx) })
	wg.Go(func() { NewKeyGenerationWatch(events.out, nil).Run(ctx, d.runner) })
	errs := make([]error, 2)
	for i, fn := range []func(context.Context) error{d.runner.Run, side} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil && !errors.Is(err, context.Canceled) {
				errs[i] = err
				cancel()
			}
		}()
	}
	o.Log.Info("bridge running", "role", o.Role, "pair", o.Pair, "listen", o.Listen, "peer", o.Peer, "pcie", o.PCIe.Kind, "spin", d.runner.Spin)
	if o.Ready != nil {
		o.Ready(d)
	}
	<-ctx.Done()
	wg.Wait()
	if srv != nil {
		sctx, scancel := context.WithTimeout(context.Background(), time.Second)
		_ = srv.Shutdown(sctx)
		scancel()
	}
	c := d.runner.Counters()
	o.Log.Info("bridge stopped", "role", o.Role, "pair", o.Pair, "tlps_sent", c.TLPsSent, "tlps_received", c.TLPsReceived)
	return errors.Join(errs...)
}

// pcieSide builds the PCIe side of o on the runner and returns its run
// function. The caller closes the UDP socket on error.
func (d *Daemon) pcieSide(o *Options) (func(context.Context) error, error) {
	var err error
	switch o.PCIe.Kind {
	case KindNetTLP:
		a, err := nettlp.NewAdapter(nettlp.AdapterConfig{Local: o.PCIe.Local, Remote: o.PCIe.Remote, DMARemote: o.PCIe.DMA, Logger: o.Log})
		if err != nil {
			return nil, err
		}
		if d.host, err = nettlpside.NewHost(d.runner, a, o.Log); err != nil {
			a.Close()
			return nil, err
		}
		return d.host.Run, nil
	case KindEmuGPU:
		if d.gpu, err = realtime.NewBridgedGPU(d.runner, realtime.BridgedGPUConfig{GPU: gpu.Config{Model: o.GPUModel}}); err != nil {
			return nil, apperr.Usage(err)
		}
		return d.gpu.Run, nil
	default: // KindMemory: Run checked the kind
		mem, err := nettlp.NewSparseMemory(o.MemBase, o.MemSize, nil)
		if err == nil {
			d.mem, err = nettlpside.NewMemoryDevice(d.runner, mem, nettlp.CompleterConfig{MPS: o.MPS, CompleterID: tlp.NewID(3, 0, 0)})
		}
		if err != nil {
			return nil, apperr.Usage(err)
		}
		d.mem.OnMPS = LogMPS(o.Log, d.mem.MPS())
		run := d.mem.Run
		if o.Doorbell != nil {
			if run, err = d.doorbell(*o.Doorbell, o, mem); err != nil {
				return nil, err
			}
		}
		return func(ctx context.Context) error { return peerTooSmall(run(ctx)) }, nil
	}
}

// LogMPS returns a MemoryDevice.OnMPS that logs each change of the
// completions' size against the configured --mps, with attrs (a pair, say).
func LogMPS(log *slog.Logger, configured int, attrs ...any) func(mps, peerMaxPayload int) {
	return func(mps, peer int) {
		args := append([]any{"mps_bytes", mps, "configured_mps_bytes", configured, "peer_max_payload_bytes", peer}, attrs...)
		if mps < configured {
			log.Warn("the peer bridge takes smaller payloads than --mps: completions follow it", args...)
		} else {
			log.Info("completions use --mps again", args...)
		}
	}
}

// peerTooSmall names the flag when a memory device's completion was
// refused for the peer's announced TLP size: the completions follow the
// peer's payload size down to 128 bytes, PCIe's smallest Max Payload Size,
// and no further.
func peerTooSmall(err error) error {
	if errors.Is(err, bridge.ErrPeerTLPSize) {
		return fmt.Errorf("%w: a memory device's completions need the peer's --max-payload at least 128, PCIe's smallest Max Payload Size", err)
	}
	return err
}
