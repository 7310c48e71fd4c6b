package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"reflect"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/app/ctl"
)

// The help's examples; examples_test registers them with a manager.
const boxExample, hostExample = ctl.BoxExample, ctl.HostExample

// newCtlCmd builds `dxpu ctl` and its subcommands, the manager's client.
func newCtlCmd(e *env) *cobra.Command {
	var o ctl.Options
	ctlCmd := &cobra.Command{
		Use:   "ctl",
		Short: "Talk to the manager: boxes, hosts, GPUs, allocations",
		Long: `Ctl is the manager's command-line client. It prints tables for people and,
with --json, the API's JSON for programs.

The manager is --manager (or $DXPU_MANAGER, default http://127.0.0.1:7700);
with several managers give them all, separated by commas, and ctl talks to
the leader;
the token for changing calls comes from --token-file (or $DXPU_TOKEN_FILE,
or the token itself in $DXPU_TOKEN).

Exit status: 0 on success, 1 when the manager refused the call (the error's
stable code is printed), 2 for usage errors (a flag value, operand or file
the manager answers HTTP 400 to among them) or when the manager cannot be
reached.`,
	}
	pf := ctlCmd.PersistentFlags()
	pf.StringVar(&o.Manager, "manager", e.getenvOr("DXPU_MANAGER", "http://127.0.0.1:7700"), "manager URL (several: comma-separated)")
	pf.StringVar(&o.TokenFile, "token-file", e.getenv("DXPU_TOKEN_FILE"), "file holding the bearer token")
	pf.BoolVar(&o.JSON, "json", false, "print JSON instead of tables")
	pf.DurationVar(&o.Timeout, "timeout", 60*time.Second, "give up on the manager after this long")
	pf.StringVar(&o.CAFile, "ca-file", e.getenv("DXPU_CA_FILE"), "PEM CA certificate(s) to trust for an https manager")
	// run fills in what flags do not carry and maps the product's error.
	run := func(f func(ctx context.Context, o ctl.Options, cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			if err := flagsPositive(cmd, "timeout"); err != nil {
				return exitCodeError{2, err}
			}
			o.Token, o.Stdin, o.Stdout = e.getenv("DXPU_TOKEN"), cmd.InOrStdin(), cmd.OutOrStdout()
			if err := manager.CheckToken(o.Token); err != nil {
				return exitCodeError{2, fmt.Errorf("$DXPU_TOKEN: %w", err)}
			}
			return exitFor(f(cmd.Context(), o, cmd, args), 2)
		}
	}
	// watching runs f until interrupted when the --watch flag is set.
	watching := func(cmd *cobra.Command) (context.Context, bool, context.CancelFunc) {
		if w, _ := cmd.Flags().GetBool("watch"); w {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			return ctx, true, stop
		}
		return cmd.Context(), false, func() {}
	}

	boxCmd := &cobra.Command{Use: "box [ID]", Short: "List boxes, or show one with its GPUs", Args: cobra.MaximumNArgs(1),
		RunE: run(func(ctx context.Context, o ctl.Options, _ *cobra.Command, args []string) error {
			if len(args) == 1 && args[0] == "" {
				return exitCodeError{2, errors.New(`ctl box "": want a box ID, or none to list every box`)}
			}
			return ctl.Box(ctx, o, append(args, "")[0])
		})}
	boxAdd := &cobra.Command{Use: "add FILE", Short: "Register or replace a box from JSON (- for stdin)", Args: cobra.ExactArgs(1),
		RunE: run(func(ctx context.Context, o ctl.Options, _ *cobra.Command, args []string) error {
			return ctl.AddBox(ctx, o, args[0])
		}),
		Long: ctl.AddHelp("box", reflect.TypeFor[pool.Box](), ctl.BoxExample)}
	boxAdd.Flags().StringVar(&o.CredentialOut, "agent-credential-out", "", "write the bridge agent's credential (issued for an agent_url) to this new 0600 file")
	boxRm := &cobra.Command{Use: "rm ID", Short: "Remove a box whose GPUs are all free", Args: cobra.ExactArgs(1),
		RunE: run(func(ctx context.Context, o ctl.Options, _ *cobra.Command, args []string) error {
			return ctl.RemoveBox(ctx, o, args[0])
		})}
	boxCmd.AddCommand(boxAdd, boxRm)

	hostCmd := &cobra.Command{Use: "host", Short: "List hosts", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, o ctl.Options, _ *cobra.Command, _ []string) error { return ctl.Hosts(ctx, o) })}
	hostAdd := &cobra.Command{Use: "add FILE", Short: "Register or replace a host from JSON (- for stdin)", Args: cobra.ExactArgs(1),
		RunE: run(func(ctx context.Context, o ctl.Options, _ *cobra.Command, args []string) error {
			return ctl.AddHost(ctx, o, args[0])
		}),
		Long: ctl.AddHelp("host", reflect.TypeFor[pool.Host](), ctl.HostExample)}
	hostAdd.Flags().StringVar(&o.CredentialOut, "agent-credential-out", "", "write the bridge agent's credential (issued for an agent_url) to this new 0600 file")
	hostRm := &cobra.Command{Use: "rm ID", Short: "Remove a host that holds no GPUs", Args: cobra.ExactArgs(1),
		RunE: run(func(ctx context.Context, o ctl.Options, _ *cobra.Command, args []string) error {
			return ctl.RemoveHost(ctx, o, args[0])
		})}
	hostCmd.AddCommand(hostAdd, hostRm)

	gpuCmd := &cobra.Command{Use: "gpu", Short: "List GPUs (--box, --state free|used|unhealthy)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, o ctl.Options, cmd *cobra.Command, _ []string) error {
			box, _ := cmd.Flags().GetString("box")
			state, _ := cmd.Flags().GetString("state")
			return ctl.GPUs(ctx, o, box, state)
		})}
	gpuCmd.Flags().String("box", "", "only this box")
	gpuCmd.Flags().String("state", "", "only free, used or unhealthy GPUs")
	gpuFail := &cobra.Command{Use: "fail ID", Short: "Mark a GPU unhealthy (its host gets a surprise removal)", Args: cobra.ExactArgs(1),
		RunE: run(func(ctx context.Context, o ctl.Options, _ *cobra.Command, args []string) error {
			return ctl.SetHealth(ctx, o, args[0], pool.Unhealthy)
		})}
	gpuHeal := &cobra.Command{Use: "heal ID", Short: "Mark a GPU healthy again", Args: cobra.ExactArgs(1),
		RunE: run(func(ctx context.Context, o ctl.Options, _ *cobra.Command, args []string) error {
			return ctl.SetHealth(ctx, o, args[0], pool.Healthy)
		})}
	gpuCmd.AddCommand(gpuFail, gpuHeal)

	var req pool.Request
	var maxRTT time.Duration
	allocCmd := &cobra.Command{Use: "alloc --host H --count N", Short: "Lend GPUs to a host", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, o ctl.Options, _ *cobra.Command, _ []string) error {
			req.MaxRTT = pool.Duration(maxRTT)
			return ctl.Allocate(ctx, o, req)
		})}
	af := allocCmd.Flags()
	af.StringVar(&req.Host, "host", "", "host that gets the GPUs (required)")
	af.IntVar(&req.Count, "count", 0, "number of GPUs (required)")
	af.StringVar(&req.Model, "model", "", "GPU model, e.g. H100")
	af.Uint64Var(&req.MinMemoryMiB, "min-memory", 0, "minimum GPU memory in MiB")
	af.BoolVar(&req.SameBox, "same-box", false, "all GPUs from one box (peer-to-peer)")
	af.BoolVar(&req.Spread, "spread", false, "spread GPUs over boxes")
	af.DurationVar(&maxRTT, "max-rtt", 0, "maximum RTT between the host and a GPU's box, e.g. 20us")
	af.StringVar(&req.RequestID, "request-id", "", "idempotency key: retrying with it returns the same allocation (with other parameters: 409 conflict)")
	allocList := &cobra.Command{Use: "list", Short: "List allocations (--host to filter)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, o ctl.Options, cmd *cobra.Command, _ []string) error {
			host, _ := cmd.Flags().GetString("host")
			return ctl.Allocations(ctx, o, host)
		})}
	allocList.Flags().String("host", "", "only this host's allocations")
	allocCmd.AddCommand(allocList)

	freeCmd := &cobra.Command{Use: "free ID...", Short: "Release allocations", Args: cobra.MinimumNArgs(1),
		RunE: run(func(ctx context.Context, o ctl.Options, _ *cobra.Command, args []string) error {
			return ctl.Free(ctx, o, args)
		})}
	rekeyCmd := &cobra.Command{Use: "rekey ID...", Short: "Give every pair of allocations a fresh key (a lossless key change on both bridges)", Args: cobra.MinimumNArgs(1),
		RunE: run(func(ctx context.Context, o ctl.Options, _ *cobra.Command, args []string) error {
			return ctl.Rekey(ctx, o, args)
		})}
	drainCmd := &cobra.Command{Use: "drain BOX", Short: "Stop new allocations on a box and list the ones still there", Args: cobra.ExactArgs(1),
		RunE: run(func(ctx context.Context, o ctl.Options, cmd *cobra.Command, args []string) error {
			off, _ := cmd.Flags().GetBool("off")
			return ctl.Drain(ctx, o, args[0], !off)
		})}
	drainCmd.Flags().Bool("off", false, "resume allocations on the box")
	rttCmd := &cobra.Command{Use: "rtt", Short: "List measured RTTs, or record one with --host --box --rtt", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, o ctl.Options, cmd *cobra.Command, _ []string) error {
			host, _ := cmd.Flags().GetString("host")
			box, _ := cmd.Flags().GetString("box")
			rtt, _ := cmd.Flags().GetDuration("rtt")
			return ctl.RTT(ctx, o, host, box, rtt)
		})}
	rttCmd.Flags().String("host", "", "host")
	rttCmd.Flags().String("box", "", "box")
	rttCmd.Flags().Duration("rtt", 0, "measured round-trip time")
	statsCmd := &cobra.Command{Use: "stats", Short: "Count GPUs by state", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, o ctl.Options, _ *cobra.Command, _ []string) error { return ctl.Stats(ctx, o) })}
	tableCmd := &cobra.Command{Use: "table", Short: "Print the switch forwarding table (--watch: every change)", Args: cobra.NoArgs,
		RunE: run(func(_ context.Context, o ctl.Options, cmd *cobra.Command, _ []string) error {
			ctx, watch, stop := watching(cmd)
			defer stop()
			if watch {
				return ctl.WatchTable(ctx, o)
			}
			return ctl.Table(ctx, o)
		})}
	tableCmd.Flags().Bool("watch", false, "keep printing the table at every change (until interrupted)")

	eventsCmd := &cobra.Command{Use: "events", Short: "Print pool events (--host to filter, --watch to follow)", Args: cobra.NoArgs,
		RunE: run(func(_ context.Context, o ctl.Options, cmd *cobra.Command, _ []string) error {
			host, _ := cmd.Flags().GetString("host")
			ctx, watch, stop := watching(cmd)
			defer stop()
			return ctl.Events(ctx, o, host, watch)
		})}
	eventsCmd.Flags().String("host", "", "only this host's events")
	eventsCmd.Flags().Bool("watch", false, "keep printing new events (until interrupted)")

	ctlCmd.AddCommand(boxCmd, hostCmd, gpuCmd, allocCmd, freeCmd, rekeyCmd, drainCmd, rttCmd, statsCmd, tableCmd, eventsCmd)
	return ctlCmd
}
