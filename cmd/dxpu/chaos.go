package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/internal/app/chaos"
	"github.com/dxpu/dxpu/internal/app/units"
)

// newChaosCmd builds `dxpu chaos`, the fault campaign (package
// internal/app/chaos).
func newChaosCmd(e *env) *cobra.Command {
	var (
		o        chaos.Options
		asJSON   bool
		schedule bool
		history  string
	)
	o.Bounds = chaos.DefaultBounds
	cmd := &cobra.Command{
		Use:   "chaos [--duration D] [--seed N] [--json]",
		Short: "Run a fault campaign against real daemons (on loopback or in network namespaces) and check its history",
		Long: `Chaos starts a real deployment on loopback (127.N.0.x; no root needed): a
manager, a UDP switch, two GPU boxes' agents (two emulated GPUs each) and two
hosts' agents, each a dxpu process (this binary, or --dxpu), registered as
examples/README.md does. Clients allocate, free and rekey through the
manager's API while a seeded nemesis injects faults, one at a time: SIGKILL
(restarted later), SIGSTOP/SIGCONT and restart of any daemon (the manager
included), rekey storms, agent credential rotation (re-registration and
SIGHUP), client floods, a box's link cut and 1% loss on a box's link for a
few seconds (the UDP switch has no port to cut, so each box's frames cross a
cable in this process, which the nemesis cuts or makes lossy), and a host
agent's API out for 7-10s (its credential file replaced and SIGHUP, no
re-registration, so it refuses the manager while its data plane runs) while
its allocations are rekeyed. An observer
snapshots the manager, the switch and every agent five times a second.
After --duration the clients and the nemesis stop and the system must
converge.

With --vm-host, host2's agent is a VM host (bridge agent --vm: a 256 MiB
QEMU guest under TCG, booted by the agent, whose PCIe tree the manager's
saga hot-adds each GPU into and that enumerates it and reads its BOOT_0
through the fabric); the nemesis kills and restarts it like any daemon,
which reboots the guest. Its pairs are held to the --vm-*-bound bounds,
printed in the report beside the others; the copies go through host1's
pairs only (a guest's agent has no copy check), the guest's enumeration
(vendor, BOOT_0) is checked as any host's.

With --netns (root only) each daemon runs in a network namespace of its
own, and the campaign's clients, observer and cables in one more, each
joined by a veth to a Linux bridge in a "wire" namespace, addressed
10.N.0.x/24 as loopback mode addresses 127.N.0.x: every frame and API call
crosses real interfaces. The namespaces are anonymous (none in
'ip netns list', nothing added to this namespace) and are torn down at the
end, on failure too. Without root --netns fails; loopback mode needs none.

The clients also copy random bytes through every live pair into its GPU's
VRAM and back (the host agent's copy check). The history is then checked: no
data corruption (the bytes come back as they went; every enumerated GPU reads
vendor 0x10de and the same PMC_BOOT_0); every pair of an active allocation up (its GPU on its host) within --pair-up-bound or the
allocation degraded with a reason; both ends of a live pair on the same key
generation within --key-split-bound; a pair's key generations strictly
increasing, each naming one key (agents report key_fingerprint and
keys_refused); no healthy GPU removed (no fault breaks a GPU); convergence (allocations up, the switch's table version the
manager's, the agents' pairs the manager's) within --converge-bound.

The same --seed gives the same schedule of faults (--schedule prints it and
runs nothing). The report names the operations, the faults by kind, each
violation with its excerpt of the history and the worst time to converge;
--json prints it as one object.

Exit status: 0 when no violation was found, 1 when one was, 2 on bad flags
or when the campaign could not run.`,
		Example: `  dxpu chaos --duration 30s --seed 1
  dxpu chaos --seed 7 --schedule
  sudo dxpu chaos --netns --duration 20s --seed 3
  dxpu chaos --duration 2m --seed 42 --json --dir /tmp/chaos42   # keeps the daemons' logs`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Duration < 5*time.Second {
				return exitCodeError{2, units.Errorf("--duration %v: want at least 5s (a 3s warm-up, then faults)", o.Duration)}
			}
			if o.Bounds.PairUp <= 0 || o.Bounds.KeySplit <= 0 || o.Bounds.Converge <= 0 {
				return exitCodeError{2, errors.New("--pair-up-bound, --key-split-bound and --converge-bound must be positive")}
			}
			if o.Net < 0 || o.Net > 255 {
				return exitCodeError{2, fmt.Errorf("--net %d: want 1..255 (the second octet of 127.N.0.x), or 0 to pick one", o.Net)}
			}
			sched := chaos.Schedule(o.Seed, o.Duration, chaos.RunTargets())
			if schedule {
				chaos.WriteSchedule(e.stdout, sched)
				return nil
			}
			if o.NetNS {
				if err := chaos.RequireRoot(os.Geteuid()); err != nil {
					return exitCodeError{2, err}
				}
			}
			if o.VMHost {
				if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
					return exitCodeError{2, fmt.Errorf("--vm-host: needs QEMU: %w", err)}
				}
				if o.VMBounds.PairUp <= 0 || o.VMBounds.KeySplit <= 0 || o.VMBounds.Converge <= 0 {
					return exitCodeError{2, errors.New("--vm-pair-up-bound, --vm-key-split-bound and --vm-converge-bound must be positive")}
				}
			}
			if o.Dxpu == "" {
				exe, err := os.Executable()
				if err != nil {
					return exitCodeError{2, fmt.Errorf("--dxpu: finding this binary: %w", err)}
				}
				o.Dxpu = exe
			}
			if _, err := os.Stat(o.Dxpu); err != nil {
				return exitCodeError{2, fmt.Errorf("--dxpu: %w", err)}
			}
			o.Log = e.log
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rep, err := chaos.Run(ctx, o)
			if err != nil {
				return exitCodeError{2, fmt.Errorf("chaos: %w", err)}
			}
			if history != "" {
				if err := writeHistory(history, rep); err != nil {
					return exitCodeError{2, fmt.Errorf("--history: %w", err)}
				}
			}
			if asJSON {
				err = rep.WriteJSON(e.stdout)
			} else {
				err = rep.WriteText(e.stdout)
			}
			if err != nil {
				return exitCodeError{2, err}
			}
			if n := len(rep.Violations); n > 0 {
				return exitCodeError{1, fmt.Errorf("chaos: %d violations (seed %d)", n, o.Seed)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.Duration, "duration", 30*time.Second, "how long the clients and the nemesis run (then the system must converge)")
	f.Int64Var(&o.Seed, "seed", 1, "seed of the fault schedule (same seed, same schedule)")
	f.BoolVar(&asJSON, "json", false, "print the report as one JSON object")
	f.BoolVar(&schedule, "schedule", false, "print the seed's schedule of faults and run nothing")
	f.StringVar(&o.Dxpu, "dxpu", "", "the dxpu binary the daemons run (default: this one)")
	f.StringVar(&o.Dir, "dir", "", "directory for the daemons' state and logs, kept afterwards (default: a temporary one, removed)")
	f.StringVar(&history, "history", "", "also write the whole history (operations, faults, observations) to this file, one JSON object a line")
	f.IntVar(&o.Net, "net", 0, "second octet of the addresses 127.N.0.x (10.N.0.x with --netns; 0: from the process ID)")
	f.BoolVar(&o.VMHost, "vm-host", false, "host2's agent boots a QEMU guest (TCG) as its host (needs qemu-system-x86_64); its pairs get the --vm-*-bound bounds")
	f.StringVar(&o.GuestTool, "guest-tool", "", "--vm-host: static dxpu-guest binary (default: next to --dxpu, else on PATH)")
	o.VMBounds = chaos.DefaultVMBounds
	f.DurationVar(&o.VMBounds.PairUp, "vm-pair-up-bound", o.VMBounds.PairUp, "--pair-up-bound for the VM host's pairs (its guest reboots with its agent)")
	f.DurationVar(&o.VMBounds.KeySplit, "vm-key-split-bound", o.VMBounds.KeySplit, "--key-split-bound for the VM host's pairs")
	f.DurationVar(&o.VMBounds.Converge, "vm-converge-bound", o.VMBounds.Converge, "--converge-bound with a VM host")
	f.BoolVar(&o.NetNS, "netns", false, "run each daemon in a network namespace of its own, joined by veths to a bridge (needs root)")
	f.DurationVar(&o.Bounds.PairUp, "pair-up-bound", o.Bounds.PairUp, "how long a pair may be down before its allocation must be degraded")
	f.DurationVar(&o.Bounds.KeySplit, "key-split-bound", o.Bounds.KeySplit, "how long the ends of a pair may run different key generations")
	f.DurationVar(&o.Bounds.Converge, "converge-bound", o.Bounds.Converge, "how long after the nemesis stops everything must converge")
	return cmd
}

func writeHistory(path string, rep chaos.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := rep.WriteHistory(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
