package switchd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/app/httpguard"
	"github.com/dxpu/dxpu/internal/app/jsonfile"
	"github.com/dxpu/dxpu/xdp"
)

// Options is the switch daemon's configuration.
type Options struct {
	Ports     []string // interfaces to switch between (not for mode udp)
	Mode      string   // xdp, afxdp, packet or udp
	TableFile string   // the table from this file (re-read when it changes), or
	Manager   string   // the table from this manager's URL
	Token     string   // bearer token for the manager
	Metrics   string   // TCP address for /metrics ("": none)
	UDPListen string   // mode udp: the relay's address
	UDPPort   uint16   // of dxpu frames
	MaxPairs  uint32   // mode xdp: pair table size
	SlowPath  string   // mode xdp: packet or xsk
	Log       *slog.Logger
	// Ready, when set, is called once the first table is in force (with a
	// table file) or the watch has started (with a manager), with the
	// metrics address (nil without Metrics).
	Ready func(metrics net.Addr)
	// MetricsServer bounds the /metrics server (zero fields:
	// httpguard.MetricsDefaults).
	MetricsServer httpguard.Config
}

// Run runs the switch until ctx ends, then returns nil. Bad options and
// set-up failures (no such port, no privilege, an unusable table file) are
// apperr.ErrUsage; an address in use (--udp-listen, --metrics) is
// apperr.ErrFailed; an error of the data path while running is plain.
func Run(ctx context.Context, o Options) error {
	o.Log = orDiscard(o.Log)
	ports, err := checkOptions(&o)
	if err != nil {
		return err
	}
	// The table file and the metrics address are read before the data
	// path starts (and logs that it did): a bad one is one line, alone.
	var first *table.Table
	if o.TableFile != "" {
		t, err := switching.LoadTable(o.TableFile)
		if err != nil {
			return apperr.Usage(jsonfile.ExplainFile(err, o.TableFile, switching.TableFileForm))
		}
		first = t
	}
	if o.Metrics != "" {
		if err := httpguard.CheckListenAddr("metrics", o.Metrics); err != nil {
			return err
		}
	}
	dp, err := newDataPath(&o, ports)
	if err != nil {
		return err
	}
	defer dp.close()

	var version atomic.Uint64
	apply := func(t *table.Table) {
		skipped, err := dp.apply(t)
		for _, s := range skipped {
			o.Log.Warn("switch: pair not installed", "err", s)
		}
		if err != nil {
			o.Log.Error("switch: applying table", "version", t.Version, "err", err)
			return
		}
		version.Store(t.Version)
		o.Log.Info("switch: table in force", "version", t.Version, "pairs", len(t.Pairs)-len(skipped))
	}

	var metricsAddr net.Addr
	if o.Metrics != "" {
		reg := prometheus.NewRegistry()
		reg.MustRegister(switching.NewCollector(dp, version.Load))
		ln, err := httpguard.Listen("metrics", o.Metrics)
		if err != nil {
			return fmt.Errorf("switch: %w", err) // in use: exit 1
		}
		srv := httpguard.ServeMetrics("switch metrics", ln, reg, o.MetricsServer, o.Log)
		defer srv.Close()
		metricsAddr = ln.Addr()
		o.Log.Info("switch: metrics", "url", "http://"+metricsAddr.String()+"/metrics")
	}

	if first != nil {
		apply(first)
		go WatchTableFile(ctx, o.TableFile, time.Second, apply, o.Log)
	} else {
		// A token refused at the first answer ends the switch (exit 2).
		wctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		ctx = wctx
		go func() {
			if err := WatchManager(ctx, ctlclient.New(o.Manager, o.Token), apply, o.Log); err != nil {
				cancel(err)
			}
		}()
	}
	o.Log.Info("switch: running", "mode", o.Mode, "ports", o.Ports)
	if o.Ready != nil {
		o.Ready(metricsAddr)
	}
	err = dp.run(ctx)
	if cause := context.Cause(ctx); errors.Is(cause, ErrTokenRefused) {
		return apperr.Usage(cause)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// checkOptions checks the options and returns the ports they name.
func checkOptions(o *Options) (map[string]switching.Port, error) {
	if (o.TableFile == "") == (o.Manager == "") {
		return nil, apperr.Usage(errors.New("switch: give exactly one of --table and --manager"))
	}
	switch o.Mode {
	case "xdp", "afxdp", "packet", "udp":
	default:
		return nil, apperr.Usage(fmt.Errorf("switch: --mode %q: want xdp, afxdp, packet or udp", o.Mode))
	}
	// A manager URL that is not one was retried for ever, as an
	// unreachable manager is.
	if o.Manager != "" {
		for _, m := range strings.Split(o.Manager, ",") {
			u, err := url.Parse(strings.TrimSpace(m))
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return nil, apperr.Usage(fmt.Errorf("switch: --manager %q: want an http(s) URL such as http://127.0.0.1:7700, or several separated by commas", m))
			}
		}
	}
	if o.Mode == "udp" && len(o.Ports) > 0 {
		return nil, apperr.Usage(fmt.Errorf("switch: --port %s: --mode udp relays over its --udp-listen socket and takes no ports", o.Ports[0]))
	}
	if o.Mode != "udp" && len(o.Ports) == 0 {
		return nil, apperr.Usage(fmt.Errorf("switch: --mode %s needs at least one --port", o.Mode))
	}
	if o.Mode == "udp" {
		if err := httpguard.CheckListenAddr("udp-listen", o.UDPListen); err != nil {
			return nil, err // --udp-listen= bound every address on a random port
		}
	}
	if o.Mode == "xdp" && o.SlowPath != "packet" && o.SlowPath != "xsk" {
		return nil, apperr.Usage(fmt.Errorf("switch: --slow-path %q: want packet or xsk", o.SlowPath))
	}
	var ports map[string]switching.Port
	if o.Mode != "udp" {
		var err error
		if ports, err = resolvePorts(o.Ports); err != nil {
			return nil, apperr.Usage(fmt.Errorf("switch: %w", err))
		}
	}
	return ports, nil
}

// newDataPath builds the mode's data path on the ports checkOptions
// returned.
func newDataPath(o *Options, ports map[string]switching.Port) (dataPath, error) {
	var dp dataPath
	var err error
	switch o.Mode {
	case "xdp":
		dp, err = newXDPDataPath(ports, xdp.Options{MaxPairs: o.MaxPairs, UDPPort: o.UDPPort}, o.SlowPath == "xsk", o.Log)
	case "packet":
		dp, err = newPacketDataPath(ports, o.UDPPort, o.Log)
	case "afxdp":
		dp, err = newAFXDPDataPath(ports, o.UDPPort, o.Log)
	default: // udp
		// --udp-listen in use is the environment's failure (exit 1), as
		// an address in use is in every daemon.
		if dp, err = newUDPDataPath(o.UDPListen, o.UDPPort, o.Log); err != nil {
			return nil, httpguard.ListenError(err)
		}
	}
	if err != nil {
		return nil, apperr.Usage(err)
	}
	return dp, nil
}
