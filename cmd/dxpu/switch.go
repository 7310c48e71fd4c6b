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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/xdp"
)

var switchFlags struct {
	ports     []string
	mode      string
	tableFile string
	manager   string
	metrics   string
	udpListen string
	udpPort   uint16
	maxPairs  uint32
	slowPath  string
}

var switchCmd = &cobra.Command{
	Use:   "switch --port IFACE... --mode xdp|afxdp|packet|udp (--table FILE | --manager URL)",
	Short: "Run the dxpu switch: forward frames between the bridges of each host-GPU pair",
	Long: `Switch forwards dxpu frames between the host bridge and the GPU bridge of each
pair in its table, dropping (and counting) frames that come from the wrong
port or MAC, and rewriting addresses for the next hop.

Modes:
  xdp     the XDP program on every --port (driver mode where the NIC supports
          it, else generic); CONTROL frames and unknown pairs go to the slow
          path: AF_XDP sockets (--slow-path xsk) or the kernel stack, where an
          AF_PACKET listener picks them up (--slow-path packet). On veth
          ports the peers must run an XDP program too, or the kernel drops
          frames redirected into them
  afxdp   the userspace path over AF_XDP sockets (copy mode)
  packet  the userspace path over AF_PACKET sockets
  udp     a UDP socket on --udp-listen relaying dxpu datagrams between the
          endpoints' IP:port (no root needed; the demo's switch)

The table comes from --table FILE (re-read when the file changes) or from
the manager (--manager URL, long-polling GET /v1/table?watch=1&version=N).
Counters are served on --metrics (/metrics, Prometheus).
Exit status: 0 after SIGINT/SIGTERM, 2 on bad flags or setup errors.`,
	Args: cobra.NoArgs,
	RunE: runSwitch,
}

func init() {
	f := switchCmd.Flags()
	f.StringArrayVar(&switchFlags.ports, "port", nil, "interface to switch between (repeatable; not for --mode udp)")
	f.StringVar(&switchFlags.mode, "mode", "xdp", "data path: xdp, afxdp, packet or udp")
	f.StringVar(&switchFlags.tableFile, "table", "", "forwarding table file (JSON)")
	f.StringVar(&switchFlags.manager, "manager", "", "manager URL to watch the table from, e.g. http://127.0.0.1:7700")
	f.StringVar(&switchFlags.metrics, "metrics", "127.0.0.1:9855", "address for /metrics (empty: none)")
	f.StringVar(&switchFlags.udpListen, "udp-listen", "0.0.0.0:8855", "--mode udp: address to listen on")
	f.Uint16Var(&switchFlags.udpPort, "udp-port", switching.DefaultUDPPort, "UDP port of dxpu frames")
	f.Uint32Var(&switchFlags.maxPairs, "max-pairs", xdp.DefaultMaxPairs, "--mode xdp: pair table size")
	f.StringVar(&switchFlags.slowPath, "slow-path", "packet", "--mode xdp: how slow-path frames reach Go: packet (XDP_PASS to an AF_PACKET listener) or xsk (AF_XDP sockets via the XSKMAP)")
	rootCmd.AddCommand(switchCmd)
}

func switchUsage(format string, a ...any) error { return exitCodeError{2, fmt.Errorf(format, a...)} }

// switchPorts resolves interface names to ports: ifindex, MAC and first
// IPv4 address.
func switchPorts(names []string) (map[string]switching.Port, error) {
	ports := map[string]switching.Port{}
	for _, n := range names {
		ifi, err := net.InterfaceByName(n)
		if err != nil {
			return nil, fmt.Errorf("--port %s: %w", n, err)
		}
		if len(ifi.HardwareAddr) != 6 {
			return nil, fmt.Errorf("--port %s: not an Ethernet interface", n)
		}
		p := switching.Port{Name: n, Index: uint32(ifi.Index), MAC: ifi.HardwareAddr}
		if addrs, err := ifi.Addrs(); err == nil {
			for _, a := range addrs {
				if pfx, err := netip.ParsePrefix(a.String()); err == nil && pfx.Addr().Is4() {
					p.IP = pfx.Addr()
					break
				}
			}
		}
		ports[n] = p
	}
	return ports, nil
}

// switchDataPath is what a mode provides: apply a table, export counters.
type switchDataPath interface {
	apply(t *table.Table) (skipped []error, err error)
	switching.CounterSource
	run(ctx context.Context) error
	close() error
}

func runSwitch(cmd *cobra.Command, _ []string) error {
	fl := switchFlags
	if (fl.tableFile == "") == (fl.manager == "") {
		return switchUsage("switch: give exactly one of --table and --manager")
	}
	if fl.mode != "udp" && len(fl.ports) == 0 {
		return switchUsage("switch: --mode %s needs at least one --port", fl.mode)
	}
	var ports map[string]switching.Port
	if fl.mode != "udp" {
		var err error
		if ports, err = switchPorts(fl.ports); err != nil {
			return switchUsage("switch: %v", err)
		}
	}
	var dp switchDataPath
	var err error
	switch fl.mode {
	case "xdp":
		if fl.slowPath != "packet" && fl.slowPath != "xsk" {
			return switchUsage("switch: --slow-path %q: want packet or xsk", fl.slowPath)
		}
		dp, err = newXDPDataPath(ports, xdp.Options{MaxPairs: fl.maxPairs, UDPPort: fl.udpPort}, fl.slowPath == "xsk")
	case "packet":
		dp, err = newPacketDataPath(ports, fl.udpPort)
	case "afxdp":
		dp, err = newAFXDPDataPath(ports, fl.udpPort)
	case "udp":
		dp, err = newUDPDataPath(fl.udpListen, fl.udpPort)
	default:
		return switchUsage("switch: --mode %q: want xdp, afxdp, packet or udp", fl.mode)
	}
	if err != nil {
		return exitCodeError{2, err}
	}
	defer dp.close()

	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var version atomic.Uint64
	apply := func(t *table.Table) {
		skipped, err := dp.apply(t)
		for _, s := range skipped {
			slog.Warn("switch: pair not installed", "err", s)
		}
		if err != nil {
			slog.Error("switch: applying table", "version", t.Version, "err", err)
			return
		}
		version.Store(t.Version)
		slog.Info("switch: table in force", "version", t.Version, "pairs", len(t.Pairs)-len(skipped))
	}

	if fl.metrics != "" {
		reg := prometheus.NewRegistry()
		reg.MustRegister(switching.NewCollector(dp, version.Load))
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		ln, err := net.Listen("tcp", fl.metrics)
		if err != nil {
			return exitCodeError{2, fmt.Errorf("switch: --metrics: %w", err)}
		}
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(ln)
		defer srv.Close()
		slog.Info("switch: metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	}

	if fl.tableFile != "" {
		t, err := switching.LoadTable(fl.tableFile)
		if err != nil {
			return exitCodeError{2, err}
		}
		apply(t)
		go watchTableFile(ctx, fl.tableFile, apply)
	} else {
		go watchManager(ctx, ctlclient.New(fl.manager, os.Getenv("DXPU_TOKEN")), apply)
	}
	slog.Info("switch: running", "mode", fl.mode, "ports", fl.ports)
	if err := dp.run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return exitCodeError{2, err}
	}
	return nil
}

// watchTableFile re-reads the table when the file's modification time or
// size changes (checked every second).
func watchTableFile(ctx context.Context, path string, apply func(*table.Table)) {
	st, _ := os.Stat(path)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		cur, err := os.Stat(path)
		if err != nil || st != nil && cur.ModTime().Equal(st.ModTime()) && cur.Size() == st.Size() {
			continue
		}
		st = cur
		t, err := switching.LoadTable(path)
		if err != nil {
			slog.Error("switch: table file changed but is unusable; keeping the table in force", "err", err)
			continue
		}
		apply(t)
	}
}

// watchManager long-polls the manager's table, backing off on errors.
func watchManager(ctx context.Context, c *ctlclient.Client, apply func(*table.Table)) {
	var version uint64
	have := false
	backoff := time.Second
	for ctx.Err() == nil {
		var t table.Table
		var err error
		if !have {
			t, err = c.Table(ctx)
		} else {
			t, err = c.WatchTable(ctx, version, 30*time.Second)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			slog.Warn("switch: manager unreachable; keeping the table in force", "err", err, "retry_in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		backoff = time.Second
		if have && t.Version == version {
			continue
		}
		if err := t.Validate(); err != nil {
			slog.Error("switch: manager sent an invalid table; keeping the table in force", "version", t.Version, "err", err)
			version, have = t.Version, true
			continue
		}
		apply(&t)
		version, have = t.Version, true
	}
}

// --- xdp ---------------------------------------------------------------------

type xdpDataPath struct {
	*xdp.Switch
	ports map[string]switching.Port
	slow  *switching.Forwarder
	sp    *xdp.SlowPath
}

func newXDPDataPath(ports map[string]switching.Port, opts xdp.Options, xsk bool) (*xdpDataPath, error) {
	sw, err := xdp.Load(opts)
	if err != nil {
		return nil, fmt.Errorf("switch: %w (XDP needs root and a kernel with BPF; try --mode packet or udp)", err)
	}
	d := &xdpDataPath{Switch: sw, ports: ports, slow: switching.NewForwarder(opts.UDPPort)}
	d.slow.SetPorts(ports)
	// The ports must be in the maps before AF_XDP sockets can be registered.
	if _, err := sw.Reconcile(&table.Table{}, ports); err != nil {
		sw.Close()
		return nil, err
	}
	if d.sp, err = xdp.NewSlowPath(sw, d.slow, ports, xsk); err != nil {
		sw.Close()
		return nil, err
	}
	d.sp.Observe = slowPathLogger
	for name, p := range ports {
		mode, err := sw.Attach(int(p.Index))
		if err != nil {
			d.close()
			return nil, err
		}
		slog.Info("switch: XDP attached", "port", name, "mode", mode)
	}
	return d, nil
}

func (d *xdpDataPath) apply(t *table.Table) ([]error, error) {
	skipped, err := d.Reconcile(t, d.ports)
	if err == nil {
		rules, _, _ := switching.Compile(t, d.ports, d.slow.UDPPort())
		d.slow.Update(rules)
	}
	return skipped, err
}

// PairCounters and PortCounters add the slow path's forwarding (CONTROL
// messages) to the program's counters.
func (d *xdpDataPath) PairCounters(fn func(id uint32, c switching.Counters)) error {
	return switching.SumSources{d.Switch, d.slow}.PairCounters(fn)
}

func (d *xdpDataPath) PortCounters(fn func(port string, c switching.Counters)) error {
	return switching.SumSources{d.Switch, d.slow}.PortCounters(fn)
}

func (d *xdpDataPath) run(ctx context.Context) error { return d.sp.Run(ctx) }

func (d *xdpDataPath) close() error {
	err := d.Switch.Close() // detach first: nothing redirects to the sockets any more
	d.sp.Close()
	return err
}

// --- packet ------------------------------------------------------------------

type fwdDataPath struct {
	*switching.Forwarder
	ports   map[string]switching.Port
	udpPort uint16
	runFn   func(ctx context.Context) error
	closeFn func() error
}

func (d *fwdDataPath) apply(t *table.Table) ([]error, error) {
	rules, skipped, err := switching.Compile(t, d.ports, d.udpPort)
	if err != nil {
		return nil, err
	}
	d.Update(rules)
	return skipped, nil
}

func (d *fwdDataPath) run(ctx context.Context) error { return d.runFn(ctx) }
func (d *fwdDataPath) close() error                  { return d.closeFn() }

func slowPathLogger(port string, frame []byte) {
	slog.Debug("switch: slow path", "port", port, "bytes", len(frame))
}

func newPacketDataPath(ports map[string]switching.Port, udpPort uint16) (*fwdDataPath, error) {
	fwd := switching.NewForwarder(udpPort)
	fwd.SetPorts(ports)
	drv, err := switching.NewPacketDriver(fwd, ports)
	if err != nil {
		return nil, fmt.Errorf("%w (AF_PACKET needs root or CAP_NET_RAW)", err)
	}
	drv.SlowPath = slowPathLogger
	return &fwdDataPath{Forwarder: fwd, ports: ports, udpPort: udpPort, runFn: drv.Run, closeFn: drv.Close}, nil
}

// --- udp ---------------------------------------------------------------------

// udpDataPath ignores endpoint ports: every pair is reachable through the
// one socket.
type udpDataPath struct {
	fwdDataPath
}

func newUDPDataPath(listen string, udpPort uint16) (*udpDataPath, error) {
	fwd := switching.NewForwarder(udpPort)
	drv, err := switching.NewUDPDriver(fwd, listen)
	if err != nil {
		return nil, err
	}
	fwd.SetPorts(map[string]switching.Port{"udp": {Name: "udp", Index: switching.UDPIndex}})
	slog.Info("switch: UDP relay", "listen", drv.Addr())
	return &udpDataPath{fwdDataPath{Forwarder: fwd, udpPort: udpPort, runFn: drv.Run, closeFn: drv.Close}}, nil
}

func (d *udpDataPath) apply(t *table.Table) ([]error, error) {
	ports := switching.SyntheticPorts(switching.PortNames(t))
	for n, p := range ports {
		p.Index = switching.UDPIndex
		ports[n] = p
	}
	rules, skipped, err := switching.Compile(t, ports, d.udpPort)
	if err != nil {
		return nil, err
	}
	d.Update(rules)
	return skipped, nil
}
