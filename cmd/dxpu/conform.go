package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/internal/app/bridged"
	"github.com/dxpu/dxpu/internal/app/conform"
	"github.com/dxpu/dxpu/tlp/encap"
)

// rulesFailed is the error of a report in which n rules failed.
func rulesFailed(n int) error {
	if n == 1 {
		return errors.New("conform: 1 rule failed")
	}
	return fmt.Errorf("conform: %d rules failed", n)
}

// newConformCmd builds `dxpu conform`, the conformance kit.
func newConformCmd(e *env) *cobra.Command {
	var (
		o        conform.Options
		role     string
		asJSON   bool
		pair     uint32
		doorbell string
		keys     conformKeyFlags
	)
	cmd := &cobra.Command{
		Use:   "conform",
		Short: "Play the other end of a pair against a bridge implementation and judge it rule by rule",
		Long: `Conform is dxpu's conformance kit for implementations of the bridge protocol
(docs/protocol.md): it plays the other end of one pair against the
implementation under test (--peer), runs scripted scenarios (handshake,
loss and reordering recovery, duplicate and stale frames, credit exhaustion
and release, ordering, completion timeout, link flaps within and past the
silence limit, malformed frames) and judges it only from what it puts on
the wire. It prints one line per rule identifier of the spec (pass, fail or
n/a with the reason); --json prints the same as one object.

--role is the role of the implementation under test; the kit plays the
other. The timer flags give the implementation's settings, so the kit knows
what to expect; --addr and --size a window of memory at its PCIe side, and
--doorbell its test target, if it offers one (docs/protocol.md 12.1), which
makes it issue requests: without it the rules on those are n/a.
The kit measures the implementation's keepalive interval while idle, how
long it takes to declare a silent link down and how far its retransmission
timeout backs off; when these or the memory window are not what it was
told, it says so in one line and judges nothing. Its session nonces, ISNs
and data are random per run; --seed repeats a run's (the report names it).
Every real-time bound it judges gets --slack added: the default 5ms suits
an implementation on a machine of its own; where the kit and the
implementation share a loaded machine, give 100ms or more (the README's
runs do), or a process the scheduler held back fails a rule now and then.

Exit status: 0 when no rule failed, 1 when one did, 2 on bad flags, on
settings that do not match the implementation's, or when the kit itself
could not run.

A keyed pair (--key-file, --key-generation, --seal-mode: the same as the
implementation's, as for dxpu bridge) is sealed with bridge/seal, the
reference: the kit judges KEY-2..KEY-8 (sealing, key nonces, the handshake
key, the replay window's edges, rekeying and its echo, the previous key's
grace) by what the implementation answers. --next-key-file gives a newer
generation the implementation holds installed but not active, for judging a
key change (KEY-8); --rekey-after and --rekey-grace-time its rekey settings.
Without --key-file the pair is unkeyed and these flags are refused. A
keyed kit that gets only unsealed frames from the implementation fails
KEY-2, saying so, instead of waiting for a frame that opens.`,
		Example: `  dxpu conform --peer udp:192.0.2.7:8855 --role gpu --local 0.0.0.0:8855
  dxpu conform --peer udp:127.0.0.1:7001 --local 127.0.0.1:7002 --role gpu --addr 0x2000000000 \
      --keepalive 50ms --dead-after 1s --completion-timeout 2s --max-rto 200ms \
      --slack 100ms   # dxpu bridge's GPU side defaults, kit and bridge on one machine
  dxpu conform --peer eth:eth1:02:00:00:00:00:07 --role host --json
  dxpu conform --peer udp:192.0.2.7:8855 --role gpu --key-file pair1.key --seal-mode gmac`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var (
				ok  bool
				err error
			)
			// Up front, one line each: the kit otherwise took a bad value
			// for its default and waited 10 s for the implementation.
			if err := numberFlags(cmd, given(cmd, "keepalive", "dead-after", "completion-timeout", "max-rto", "slack", "rekey-grace-time", "mtu", "size")); err != nil {
				return exitCodeError{2, err}
			}
			// One header-only TLP with ECRC at the least; a UDP datagram's
			// payload at the most, as 'dxpu bridge --mtu'.
			if minMTU := encap.HeaderLen + 2 + 16 + 4; o.MTU < minMTU || o.MTU > 65507 {
				return exitCodeError{2, fmt.Errorf("--mtu %d: want %d (one header-only TLP) up to 65507 (a UDP datagram's payload)", o.MTU, minMTU)}
			}
			if o.Role, ok = encap.ParseRole(role); !ok {
				return exitCodeError{2, fmt.Errorf("--role %q: want host or gpu (the implementation under test's role)", role)}
			}
			if pair == 0 || pair >= 1<<24 {
				return exitCodeError{2, fmt.Errorf("--pair %d: want 1..16777215", pair)}
			}
			o.PairID = pair
			if doorbell != "" {
				db, err := strconv.ParseUint(doorbell, 0, 64)
				if err != nil {
					return exitCodeError{2, fmt.Errorf("--doorbell %q: want an address, like 0x2000100000", doorbell)}
				}
				o.Doorbell = &db
			}
			if err := conform.CheckMemory(o.Addr, o.Size, o.Doorbell); err != nil {
				return exitCodeError{2, err}
			}
			if o.Keys, err = keys.load(cmd.Flags()); err != nil {
				return exitCodeError{2, err}
			}
			o.Logger = e.log
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rep, err := conform.Run(ctx, o)
			if err != nil {
				return exitCodeError{2, err}
			}
			if asJSON {
				err = rep.WriteJSON(e.stdout)
			} else {
				err = rep.WriteText(e.stdout)
			}
			if err != nil {
				return exitCodeError{2, err}
			}
			if f := rep.Failed(); len(f) > 0 {
				return exitCodeError{1, rulesFailed(len(f))}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Peer, "peer", "", "implementation under test: udp:ADDR:PORT or eth:IFACE:MAC (raw Ethernet, needs CAP_NET_RAW)")
	f.StringVar(&role, "role", "", "role of the implementation under test: host or gpu")
	f.StringVar(&o.Local, "local", "0.0.0.0:8855", "the kit's UDP address, where the implementation sends")
	f.Uint32Var(&pair, "pair", 1, "pair ID (24 bits)")
	f.Uint64Var(&o.Addr, "addr", 0, "start of memory at the implementation's PCIe side the kit may write and read (DW-aligned, and early enough in its 4 KiB page that the kit's requests, which reach 544 into the window or --size if less, cross no page boundary)")
	bytesVar(f, &o.Size, "size", 4096, "bytes of that memory")
	f.StringVar(&doorbell, "doorbell", "", "address of the implementation's test target (docs/protocol.md 12.1): through it the kit judges tags, ordering, completion timeout and link-down of requests the implementation issues")
	bytesVar(f, &o.MTU, "mtu", 1472, "the implementation's largest frame from the dxpu header on (FRM-3)")
	f.StringArrayVar(&o.Scenarios, "scenario", nil, fmt.Sprintf("run only this scenario (repeatable): %v", conform.Scenarios()))
	f.DurationVar(&o.Timers.Keepalive, "keepalive", 0, "the implementation's keepalive interval (default 1ms)")
	f.DurationVar(&o.Timers.DeadAfter, "dead-after", 0, "the implementation's silence limit before link-down (default 10ms)")
	f.DurationVar(&o.Timers.CompletionTimeout, "completion-timeout", 0, "the implementation's completion timeout (default 50ms)")
	f.DurationVar(&o.Timers.MaxRTO, "max-rto", 0, "the implementation's largest retransmission timeout (default 20ms)")
	f.Uint64Var(&o.Seed, "seed", 0, "seed of the kit's nonces, ISNs and data (0: random; the report names it)")
	f.DurationVar(&o.Timers.Slack, "slack", 0, "added to every real-time bound the kit judges (default 5ms)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	keys.register(f)
	_ = cmd.MarkFlagRequired("peer")
	_ = cmd.MarkFlagRequired("role")
	return cmd
}

// conformKeyFlags are the kit's key flags, named as dxpu bridge's.
type conformKeyFlags struct {
	file, nextFile, mode string
	gen, nextGen         uint32
	rekeyAfter           uint64
	graceTime            time.Duration
}

func (k *conformKeyFlags) register(f *pflag.FlagSet) {
	f.StringVar(&k.file, "key-file", "", "the pair key the implementation holds: 32 raw bytes or 64 hex digits, mode 0600 (empty: the pair is unkeyed)")
	f.Uint32Var(&k.gen, "key-generation", 1, "generation number of --key-file's key")
	f.StringVar(&k.mode, "seal-mode", "gcm", "gcm or gmac, as the implementation seals")
	f.StringVar(&k.nextFile, "next-key-file", "", "a newer pair key the implementation holds installed, not active (judges a key change, KEY-8)")
	f.Uint32Var(&k.nextGen, "next-key-generation", 0, "generation number of --next-key-file's key (default --key-generation + 1)")
	f.Uint64Var(&k.rekeyAfter, "rekey-after", 0, "the implementation's frames per key before it rekeys (default 2^22)")
	f.DurationVar(&k.graceTime, "rekey-grace-time", 0, "the implementation's longest grace for a previous receive key (default 1s)")
}

// load checks the key flags and reads the keys. A key flag given without
// --key-file is refused: the run is unkeyed, and ignoring it would judge
// another pair than the one the user described.
func (k *conformKeyFlags) load(fs *pflag.FlagSet) (conform.Keys, error) {
	mode, err := seal.ParseMode(k.mode)
	if err != nil {
		return conform.Keys{}, err // names --seal-mode
	}
	if f := fs.Lookup("rekey-after"); f != nil && f.Changed && k.rekeyAfter == 0 {
		return conform.Keys{}, fmt.Errorf("--rekey-after 0: must be positive")
	}
	if k.file == "" {
		for _, name := range []string{"next-key-file", "seal-mode", "key-generation", "next-key-generation", "rekey-after", "rekey-grace-time"} {
			if f := fs.Lookup(name); f != nil && f.Changed {
				return conform.Keys{}, fmt.Errorf("--%s %s without --key-file: the pair is unkeyed", name, flagText(f))
			}
		}
		return conform.Keys{}, nil
	}
	key, err := bridged.LoadKeyFileFor("--key-file", k.file)
	if err != nil {
		return conform.Keys{}, err
	}
	if k.gen == 0 {
		return conform.Keys{}, fmt.Errorf("--key-generation 0: generations start at 1")
	}
	out := conform.Keys{Key: key, Generation: k.gen, Mode: mode, RekeyAfter: k.rekeyAfter, GraceTime: k.graceTime}
	if k.nextFile != "" {
		if out.NextKey, err = bridged.LoadKeyFileFor("--next-key-file", k.nextFile); err != nil {
			return conform.Keys{}, err
		}
		out.NextGeneration = k.nextGen
		if out.NextGeneration == 0 {
			out.NextGeneration = k.gen + 1
		}
		if out.NextGeneration <= k.gen {
			return conform.Keys{}, fmt.Errorf("--next-key-generation %d: want above --key-generation %d", out.NextGeneration, k.gen)
		}
	}
	return out, nil
}

// given returns those of names that are on the command line: the kit's
// flags whose 0 means the default, which a 0 typed out means nothing for.
func given(cmd *cobra.Command, names ...string) []string {
	var out []string
	for _, n := range names {
		if f := cmd.Flags().Lookup(n); f != nil && f.Changed {
			out = append(out, n)
		}
	}
	return out
}
