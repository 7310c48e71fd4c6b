package main

import (
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/internal/app/switchd"
	"github.com/dxpu/dxpu/xdp"
)

// newSwitchCmd builds `dxpu switch` (package internal/app/switchd runs it).
func newSwitchCmd(e *env) *cobra.Command {
	o := switchd.Options{Log: e.log}
	var tokenFile string
	cmd := &cobra.Command{
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
          frames redirected into them, and bridges on the far ends must turn
          TX checksum offload off (ethtool -K IF tx off): the switch forwards
          the unfinished UDP checksum a veth leaves as it is
  afxdp   the userspace path over AF_XDP sockets (copy mode)
  packet  the userspace path over AF_PACKET sockets
  udp     a UDP socket on --udp-listen relaying dxpu datagrams between the
          endpoints' IP:port (no root needed; the demo's switch); a pair
          with an endpoint without an IP is left out, with a warning
A flag marked with a mode below (--port, --max-pairs, --slow-path,
--udp-listen) given with another --mode is refused (exit 2).

The table comes from --table FILE (re-read when its time or size changes,
every second: write a new file and rename it over the old one, so that a
half-written file is never read and a rewrite is never missed) or from
the manager (--manager URL, long-polling GET /v1/table?watch=1&version=N,
with the read-only token of --token-file, or $DXPU_TOKEN). A token the
manager refuses at its first answer ends the switch (exit 2); refused
later (rotated in the manager), it is logged and retried, the table in
force kept. Counters are served on --metrics (/metrics, Prometheus; at most 64
connections, 8 per client address, closed after 30s idle).
Exit status: 0 after SIGINT/SIGTERM, 1 when --udp-listen or --metrics
cannot be bound (the address in use, as for every daemon), 2 on bad flags
or setup errors.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := switchModeFlags(cmd, o.Mode); err != nil {
				return exitCodeError{2, err}
			}
			// 0 ran on the default size: a table of no pairs is no size.
			if o.Mode == "xdp" && (o.MaxPairs == 0 || o.MaxPairs > xdp.MaxMaxPairs) {
				return exitCodeError{2, fmt.Errorf("switch: --max-pairs %d: want 1..%d pairs", o.MaxPairs, xdp.MaxMaxPairs)}
			}
			o.Token = e.getenv("DXPU_TOKEN")
			if err := manager.CheckToken(o.Token); err != nil {
				return exitCodeError{2, fmt.Errorf("$DXPU_TOKEN: %w", err)}
			}
			if tokenFile != "" {
				tok, err := manager.LoadTokenFileFor("--token-file", tokenFile)
				if err != nil {
					return exitCodeError{2, err}
				}
				o.Token = tok
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return exitFor(switchd.Run(ctx, o), 2)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.Ports, "port", nil, "--mode xdp, afxdp or packet: interface to switch between (repeatable)")
	f.StringVar(&o.Mode, "mode", "xdp", "data path: xdp, afxdp, packet or udp")
	f.StringVar(&o.TableFile, "table", "", "forwarding table file (JSON)")
	f.StringVar(&o.Manager, "manager", "", "manager URL (http or https) to watch the table from, e.g. http://127.0.0.1:7700; several separated by commas")
	f.StringVar(&tokenFile, "token-file", "", "file holding a token for the manager (read-only is enough; mode 0600)")
	f.StringVar(&o.Metrics, "metrics", "127.0.0.1:9855", "address for /metrics (empty: none)")
	f.StringVar(&o.UDPListen, "udp-listen", "0.0.0.0:8855", "--mode udp: address to listen on")
	udpPortVar(f, &o.UDPPort, "UDP port of dxpu frames")
	f.Uint32Var(&o.MaxPairs, "max-pairs", xdp.DefaultMaxPairs, fmt.Sprintf("--mode xdp: pair table size, 1..%d pairs", xdp.MaxMaxPairs))
	f.StringVar(&o.SlowPath, "slow-path", "packet", "--mode xdp: how slow-path frames reach Go: packet (XDP_PASS to an AF_PACKET listener) or xsk (AF_XDP sockets via the XSKMAP)")
	return cmd
}

// switchFlagModes names the flags that mean something to some modes only,
// and those modes.
var switchFlagModes = []struct {
	flag  string
	modes []string
}{
	{"port", []string{"xdp", "afxdp", "packet"}},
	{"max-pairs", []string{"xdp"}},
	{"slow-path", []string{"xdp"}},
	{"udp-listen", []string{"udp"}},
}

// switchModeFlags refuses a flag given on the command line that --mode
// does not use (--mode udp --max-pairs was taken and ignored); defaults
// are not given. An unknown mode is switchd's to refuse.
func switchModeFlags(cmd *cobra.Command, mode string) error {
	if !slices.Contains([]string{"xdp", "afxdp", "packet", "udp"}, mode) {
		return nil
	}
	for _, fm := range switchFlagModes {
		if cmd.Flags().Changed(fm.flag) && !slices.Contains(fm.modes, mode) {
			return fmt.Errorf("switch: --%s does not apply to --mode %s (only to --mode %s)", fm.flag, mode, strings.Join(fm.modes, ", "))
		}
	}
	return nil
}
