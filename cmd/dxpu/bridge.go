package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dxpu/dxpu/emu/realtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/bridge/nettlpside"
	"github.com/dxpu/dxpu/bridge/udp"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/tlp"
)

// pcieSpec is the parsed --pcie flag: what the bridge's PCIe side is.
type pcieSpec struct {
	kind               string // "nettlp", "emu-gpu", "memory"
	local, remote, dma netip.Addr
}

// parsePCIe parses nettlp:LOCAL:REMOTE[:DMAREMOTE], emu-gpu or memory.
func parsePCIe(s string) (pcieSpec, error) {
	switch s {
	case "emu-gpu", "memory":
		return pcieSpec{kind: s}, nil
	}
	parts := strings.Split(s, ":")
	if parts[0] != "nettlp" {
		return pcieSpec{}, fmt.Errorf("--pcie %q: want nettlp:LOCAL:REMOTE[:DMAREMOTE], emu-gpu or memory", s)
	}
	if len(parts) != 3 && len(parts) != 4 {
		return pcieSpec{}, fmt.Errorf("--pcie %q: want nettlp:LOCAL:REMOTE[:DMAREMOTE] (IPv4 addresses)", s)
	}
	sp := pcieSpec{kind: "nettlp"}
	for i, dst := range []*netip.Addr{&sp.local, &sp.remote, &sp.dma}[:len(parts)-1] {
		a, err := netip.ParseAddr(parts[i+1])
		if err != nil || !a.Is4() || a.IsUnspecified() {
			return pcieSpec{}, fmt.Errorf("--pcie %q: field %d %q: want a specific IPv4 address", s, i+2, parts[i+1])
		}
		*dst = a
	}
	return sp, nil
}

// bridgeOptions is one bridge daemon's configuration.
type bridgeOptions struct {
	role              bridge.Role
	pair              uint32
	listen, peer      netip.AddrPort
	pcie              pcieSpec
	metrics           string
	keepalive         time.Duration
	deadAfter         time.Duration
	completionTimeout time.Duration
	gpuModel          gpu.Model
	memBase, memSize  uint64
	log               *slog.Logger
	// ready, when set, is called once everything is bound and running.
	ready func(*bridgeDaemon)
}

// bridgeDaemon is what a running `dxpu bridge` holds.
type bridgeDaemon struct {
	runner      *driver.Runner
	host        *nettlpside.Host
	gpu         *realtime.BridgedGPU
	mem         *nettlpside.MemoryDevice
	metricsAddr net.Addr
}

var bridgeFlags struct {
	role, listen, peer, pcie, metrics string
	pair                              uint32
	keepalive, deadAfter, cplTimeout  time.Duration
	gpuModel, memBase, memSize        string
}

var bridgeCmd = &cobra.Command{
	Use:   "bridge --role host|gpu --pair N --listen UDPADDR --peer UDPADDR --pcie nettlp:LOCAL:REMOTE[:DMAREMOTE]|emu-gpu|memory",
	Short: "Run one dxpu bridge (host or GPU side of a pair) over UDP, with a NetTLP or emulated PCIe side",
	Long: `bridge runs one side of a host-GPU pair: the dxpu bridge state machine
(reliable delivery, credits, tags, ordering) exchanging frames with its peer
over UDP (--listen, --peer), and a PCIe side:

  --role host --pcie nettlp:LOCAL:REMOTE[:DMAREMOTE]
      a real host's NetTLP adapter at REMOTE: its TLPs arrive in NetTLP
      datagrams on LOCAL:0x3000..0x300f; completions and the GPU's DMA
      go back to it the same way. DMAREMOTE, if given, receives the
      requests (DMA) instead of REMOTE: a NetTLP target serving the host's
      memory next to a libtlp client doing its MMIO, on one machine.
  --role gpu --pcie emu-gpu
      an emulated GPU (--gpu-model) on the wall clock, BAR0 at 0x90000000,
      BAR1 (VRAM) at 0x2000000000, BAR3 at 0x4000000000, ID 03:00.0.
  --role gpu --pcie memory
      a memory-backed device of --mem-size bytes at --mem-base.

Bridge counters are exported to Prometheus on --metrics. Stop with Ctrl-C.

Example, a NetTLP host (libtlp on 127.0.0.1) and an emulated GPU:
  dxpu bridge --role gpu  --pair 1 --listen 127.0.0.11:7001 --peer 127.0.0.10:7001 --pcie emu-gpu &
  dxpu bridge --role host --pair 1 --listen 127.0.0.10:7001 --peer 127.0.0.11:7001 \
      --pcie nettlp:127.0.0.2:127.0.0.1 --metrics 127.0.0.10:9101 &
  dxpu nettlp read --remote 127.0.0.2 --local 127.0.0.1 --addr 0x90000000 --size 4`,
	Args: cobra.NoArgs,
	RunE: runBridgeCmd,
}

func init() {
	f := bridgeCmd.Flags()
	f.StringVar(&bridgeFlags.role, "role", "", "host or gpu")
	f.Uint32Var(&bridgeFlags.pair, "pair", 1, "pair ID (24 bits), the same on both sides")
	f.StringVar(&bridgeFlags.listen, "listen", "", "UDP address for frames from the peer (IP:PORT)")
	f.StringVar(&bridgeFlags.peer, "peer", "", "the peer bridge's UDP address (IP:PORT)")
	f.StringVar(&bridgeFlags.pcie, "pcie", "", "PCIe side: nettlp:LOCAL:REMOTE[:DMAREMOTE] (host), emu-gpu or memory (gpu)")
	f.StringVar(&bridgeFlags.metrics, "metrics", "", "serve Prometheus metrics on this TCP address (empty: off)")
	f.DurationVar(&bridgeFlags.keepalive, "keepalive", 50*time.Millisecond, "longest silence while up")
	f.DurationVar(&bridgeFlags.deadAfter, "dead-after", time.Second, "silence after which the link is down")
	f.DurationVar(&bridgeFlags.cplTimeout, "completion-timeout", 250*time.Millisecond, "a forwarded request unanswered this long gets a CA completion (below libtlp's 500 ms)")
	f.StringVar(&bridgeFlags.gpuModel, "gpu-model", "h100", "emulated GPU model (h100, a100)")
	f.StringVar(&bridgeFlags.memBase, "mem-base", "0x2000000000", "memory device base address")
	f.StringVar(&bridgeFlags.memSize, "mem-size", "64M", "memory device size (suffixes K, M, G)")
	rootCmd.AddCommand(bridgeCmd)
}

func runBridgeCmd(cmd *cobra.Command, _ []string) error {
	fl := &bridgeFlags
	o := bridgeOptions{pair: fl.pair, metrics: fl.metrics, keepalive: fl.keepalive, deadAfter: fl.deadAfter,
		completionTimeout: fl.cplTimeout, log: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	switch fl.role {
	case "host":
		o.role = bridge.RoleHost
	case "gpu":
		o.role = bridge.RoleGPU
	default:
		return exitCodeError{2, fmt.Errorf("--role %q: want host or gpu", fl.role)}
	}
	var err error
	if o.listen, err = netip.ParseAddrPort(fl.listen); err != nil {
		return exitCodeError{2, fmt.Errorf("--listen %q: %w", fl.listen, err)}
	}
	if o.peer, err = netip.ParseAddrPort(fl.peer); err != nil {
		return exitCodeError{2, fmt.Errorf("--peer %q: %w", fl.peer, err)}
	}
	if o.pcie, err = parsePCIe(fl.pcie); err != nil {
		return exitCodeError{2, err}
	}
	m, ok := gpu.ModelByName(fl.gpuModel)
	if !ok {
		return exitCodeError{2, fmt.Errorf("--gpu-model %q: want h100 or a100", fl.gpuModel)}
	}
	o.gpuModel = m
	if o.memBase, err = nettlpParseSize("--mem-base", fl.memBase); err != nil {
		return exitCodeError{2, err}
	}
	if o.memSize, err = nettlpParseSize("--mem-size", fl.memSize); err != nil {
		return exitCodeError{2, err}
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := runBridge(ctx, o); err != nil {
		var ec exitCodeError
		if errors.As(err, &ec) {
			return err
		}
		return exitCodeError{1, err}
	}
	return nil
}

// runBridge runs one bridge with its PCIe side until ctx ends.
func runBridge(ctx context.Context, o bridgeOptions) error {
	if o.log == nil {
		o.log = slog.Default()
	}
	switch {
	case o.role == bridge.RoleHost && o.pcie.kind != "nettlp":
		return exitCodeError{2, fmt.Errorf("--role host takes --pcie nettlp:LOCAL:REMOTE, not %q", o.pcie.kind)}
	case o.role == bridge.RoleGPU && o.pcie.kind == "nettlp":
		return exitCodeError{2, fmt.Errorf("--role gpu takes --pcie emu-gpu or memory (a NetTLP adapter is the host's side)")}
	}
	b, err := bridge.New(bridge.Config{Role: o.role, PairID: o.pair, Keepalive: o.keepalive, DeadAfter: o.deadAfter,
		CompletionTimeout: o.completionTimeout, MaxRTO: max(20*time.Millisecond, o.deadAfter/5)})
	if err != nil {
		return exitCodeError{2, err}
	}
	conn, err := udp.Listen(o.listen, o.peer)
	if err != nil {
		return err
	}
	d := &bridgeDaemon{runner: driver.New(b, conn)}
	d.runner.OnEvent = func(e bridge.Event) { o.log.Info("bridge event", "pair", o.pair, "role", o.role, "event", e) }
	var side func(context.Context) error
	switch o.pcie.kind {
	case "nettlp":
		a, err := nettlp.NewAdapter(nettlp.AdapterConfig{Local: o.pcie.local, Remote: o.pcie.remote, DMARemote: o.pcie.dma, Logger: o.log})
		if err != nil {
			conn.Close()
			return err
		}
		if d.host, err = nettlpside.NewHost(d.runner, a, o.log); err != nil {
			a.Close()
			conn.Close()
			return err
		}
		side = d.host.Run
	case "emu-gpu":
		if d.gpu, err = realtime.NewBridgedGPU(d.runner, realtime.BridgedGPUConfig{GPU: gpu.Config{Model: o.gpuModel}}); err != nil {
			conn.Close()
			return exitCodeError{2, err}
		}
		side = d.gpu.Run
	case "memory":
		mem, err := nettlp.NewSparseMemory(o.memBase, o.memSize, nil)
		if err == nil {
			d.mem, err = nettlpside.NewMemoryDevice(d.runner, mem, nettlp.CompleterConfig{CompleterID: tlp.NewID(3, 0, 0)})
		}
		if err != nil {
			conn.Close()
			return exitCodeError{2, err}
		}
		side = d.mem.Run
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var srv *http.Server
	if o.metrics != "" {
		ln, err := net.Listen("tcp", o.metrics)
		if err != nil {
			conn.Close()
			return fmt.Errorf("--metrics %q: %w", o.metrics, err)
		}
		d.metricsAddr = ln.Addr()
		reg := prometheus.NewRegistry()
		labels := prometheus.Labels{"pair": strconv.FormatUint(uint64(o.pair), 10), "role": o.role.String()}
		reg.MustRegister(driver.NewCollector(d.runner, labels))
		if d.host != nil {
			registerNettlpStats(reg, d.host.Adapter().Stats(), labels)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				o.log.Error("metrics server", "err", err)
			}
		}()
	}

	var wg sync.WaitGroup
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
	o.log.Info("bridge running", "role", o.role, "pair", o.pair, "listen", o.listen, "peer", o.peer, "pcie", o.pcie.kind)
	if o.ready != nil {
		o.ready(d)
	}
	<-ctx.Done()
	wg.Wait()
	if srv != nil {
		sctx, scancel := context.WithTimeout(context.Background(), time.Second)
		_ = srv.Shutdown(sctx)
		scancel()
	}
	c := d.runner.Counters()
	o.log.Info("bridge stopped", "role", o.role, "pair", o.pair, "tlps_sent", c.TLPsSent, "tlps_received", c.TLPsReceived)
	return errors.Join(errs...)
}

// registerNettlpStats exports a NetTLP adapter's counters.
func registerNettlpStats(reg *prometheus.Registry, s *nettlp.Stats, labels prometheus.Labels) {
	for _, m := range []struct {
		name, help string
		v          func() uint64
	}{
		{"dxpu_nettlp_datagrams_total", "NetTLP datagrams received from the host", s.Datagrams.Load},
		{"dxpu_nettlp_tlps_sent_total", "TLPs sent to the host in NetTLP datagrams", s.Completions.Load},
		{"dxpu_nettlp_malformed_total", "datagrams or TLPs from the host that could not be delivered", s.Malformed.Load},
		{"dxpu_nettlp_ignored_total", "datagrams from addresses other than the host's adapter", s.Ignored.Load},
		{"dxpu_nettlp_send_errors_total", "datagrams to the host the socket refused", s.SendErrors.Load},
	} {
		v := m.v
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: m.name, Help: m.help, ConstLabels: labels},
			func() float64 { return float64(v()) }))
	}
}
