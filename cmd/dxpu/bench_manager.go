package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/internal/app/managerbench"
)

// newBenchManagerCmd builds `dxpu bench manager` (package
// internal/app/managerbench measures).
func newBenchManagerCmd() *cobra.Command {
	var (
		o         managerbench.Options
		endpoints string
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:   "manager",
		Short: "Measure the manager under concurrent allocations and frees, on bbolt or etcd",
		Long: `manager runs a manager in this process over a real store, with a pool of
--gpus GPUs in boxes of 8 and --hosts hosts written into it, fake agents
that record every pair they are told to program, and --clients clients
allocating 1-8 GPUs for random hosts and freeing their oldest allocation,
at once, for --duration (the pool stays about 60% lent). It reports
allocations per second and latency percentiles, and checks that no GPU was
lent twice and that the clients', the pool's and the agents' counts agree;
then it closes the manager and the store, reopens them, and times the new
manager to its first allocation (restart_ms).

--store bbolt keeps the pool in a file under --dir (default: a temporary
directory); --store etcd in an etcd cluster at --etcd-endpoints, under a
fresh key prefix, or without them in a three-member cluster on 127.0.0.1
started from the etcd on PATH for the run and removed after it.`,
		Example: "  dxpu bench manager --json\n  dxpu bench manager --gpus 800 --hosts 100 --clients 10 --duration 3s\n" +
			"  dxpu bench manager --store etcd\n  dxpu bench manager --store etcd --etcd-endpoints http://10.0.0.1:2379,http://10.0.0.2:2379,http://10.0.0.3:2379",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if endpoints != "" {
				o.EtcdEndpoints = strings.Split(endpoints, ",")
				for i, e := range o.EtcdEndpoints {
					o.EtcdEndpoints[i] = strings.TrimSpace(e)
				}
			}
			// Every flag has a value here: an explicit 0 is refused, not
			// read as the default.
			if err := managerbench.Validate(o); err != nil {
				return exitCodeError{2, err}
			}
			// A flag the store would ignore is refused: the run would not
			// be the one asked for.
			f := cmd.Flags()
			if f.Changed("dir") && o.Store != "bbolt" {
				return exitCodeError{2, fmt.Errorf("--dir: only with --store bbolt, not %s", o.Store)}
			}
			if f.Changed("etcd-endpoints") && o.Store != "etcd" {
				return exitCodeError{2, fmt.Errorf("--etcd-endpoints: only with --store etcd, not %s", o.Store)}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return exitFor(managerbench.WriteReport(ctx, o, asJSON, cmd.OutOrStdout()), 1)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Store, "store", "bbolt", "bbolt, etcd, or memory (no persistence: the baseline of the store's cost)")
	f.StringVar(&o.Dir, "dir", "", "with bbolt: an empty directory for the store file (default: a temporary one, removed)")
	f.StringVar(&endpoints, "etcd-endpoints", "", "with etcd: the cluster's client URLs, comma-separated (default: start three members on 127.0.0.1)")
	f.IntVar(&o.GPUs, "gpus", 10000, "GPUs in the pool (a multiple of 8: boxes of 8)")
	f.IntVar(&o.Hosts, "hosts", 1000, "hosts in the pool")
	f.IntVar(&o.Clients, "clients", 50, "clients allocating and freeing at once")
	f.DurationVar(&o.Duration, "duration", 10*time.Second, "how long the clients run")
	f.Uint64Var(&o.Seed, "seed", 1, "seed of the clients' requests")
	f.BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}
