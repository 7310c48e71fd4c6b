package main

import (
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/internal/app/linkbench"
)

// virtualDuration is --duration's default with --virtual: the simulator
// runs a TLP every --interval, so seconds would be millions of TLPs.
const virtualDuration = 2 * time.Millisecond

// newBenchLinkCmd builds `dxpu bench link` (package internal/app/linkbench
// measures).
func newBenchLinkCmd() *cobra.Command {
	var o linkbench.ReportOptions
	cmd := &cobra.Command{
		Use:   "link",
		Short: "Measure a bridge pair over UDP on loopback, with injected faults",
		Long: `link runs a host-side and a GPU-side bridge in this process, joined by two
UDP sockets on 127.0.0.1, on real time. Loss, duplication, reordering,
corruption, delay and a bandwidth limit are injected in code (the kernel
has no netem). A stub requester on the host side issues the TLP mix as fast
as the bridges take it; a stub completer on the GPU side answers reads with
completions split at MPS and a 64-byte RCB.

It prints goodput, latency percentiles (posted writes one way, reads round
trip), retransmissions, and the invariants it checked: delivered, lost,
duplicated, misordered (posted writes) and unanswered (non-posted requests
without a final completion). With faults, a lossless baseline runs first
with the same mix so the goodput ratio compares figures from one run.
Just before and just after the pair, two plain UDP sockets on the same
loopback are flooded with MTU-sized datagrams (udp_goodput_gbps, their
mean: a shared machine's speed drifts, and two figures far apart are
flagged), and after it one TCP connection streams (tcp_goodput_gbps): the
lossless pair's goodput over them is pair_over_udp and pair_over_tcp. UDP
runs again with datagrams of the pair's mean frame, on the side that sent
more bytes (pair_over_udp_same_frames). --raw=false skips them.

--spin makes each bridge's runner poll its socket that long after its last
frames before it sleeps, as 'dxpu bridge --spin' does: a busy pair then
takes its frames without waiting for a wake-up (spin_us in the result).

Less obvious keys of --json: max_reads_in_flight (the most reads the
requester had out at once) and max_wire_tag (the largest tag the GPU side
saw: 256 or more means 10-bit tags); completion_timeout_ms, reads_timed_out
and late_completions (reads the host side gave up on, and completions that
came after); max_stall_ms (the longest this process went unscheduled: a
loaded machine); completions_deferred (completions the GPU side's bridge
took a turn later, its queue full); udp_drift_ratio (the two UDP floods'
larger goodput over the smaller: far above 1, the run is not to be
compared); link_stats (what the injected faults did to each direction,
only with faults).

--shared-socket runs each bridge over a data-plane port shared by pairs
(frames told apart by the pair ID in the dxpu header), as 'dxpu bridge
agent' runs every pair it holds: on Linux the kernel steers the pair's
frames to a socket of its own on that port (pair_steered in the result),
elsewhere they pass through the port's queues; --mtu at most 9216 then.

  dxpu bench link --loss 0.01 --delay 5us --json
  dxpu bench link --virtual --loss 0.01 --delay 5us --link-gbps 100 --duration 2ms
  dxpu bench link --mix write=0.5,read=0.5 --read-size 4096 --duration 5s
  dxpu bench link --spin 100us --json
  dxpu bench link --shared-socket --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := oneLinkRate(cmd.Flags()); err != nil {
				return exitCodeError{2, err}
			}
			if err := flagsProbability(cmd, "loss", "dup", "reorder", "corrupt"); err != nil {
				return exitCodeError{2, err}
			}
			if err := flagsRate(cmd, "link-gbps"); err != nil {
				return exitCodeError{2, err}
			}
			// The virtual requester is open loop (one TLP every
			// --interval): nothing there counts reads in flight.
			if o.Virtual && cmd.Flags().Changed("outstanding") {
				return exitCodeError{2, errors.New("--outstanding: real time only (a --virtual run issues one TLP every --interval)")}
			}
			if !o.Virtual && cmd.Flags().Changed("interval") {
				return exitCodeError{2, errors.New("--interval: --virtual only (a real-time run issues as fast as the bridges take)")}
			}
			if cmd.Flags().Changed("raw-for") && (o.Virtual || !o.Raw) {
				return exitCodeError{2, errors.New("--raw-for: no raw baseline runs with --virtual or --raw=false")}
			}
			if o.Virtual && !cmd.Flags().Changed("duration") {
				o.Duration = virtualDuration
			}
			o.Progress = cmd.ErrOrStderr()
			return exitFor(linkbench.WriteReport(cmd.Context(), o, cmd.OutOrStdout()), 2)
		},
	}
	f := cmd.Flags()
	f.Float64Var(&o.Loss, "loss", 0, "probability a frame is lost (each direction)")
	f.Float64Var(&o.Dup, "dup", 0, "probability a frame is duplicated")
	f.Float64Var(&o.Reorder, "reorder", 0, "probability a frame is held back behind the next one")
	f.Float64Var(&o.Corrupt, "corrupt", 0, "probability a frame gets a bit flipped (dropped by the FCS check)")
	f.DurationVar(&o.Delay, "delay", 0, "one-way delay added to every frame (e.g. 5us; at most 1s)")
	f.Float64Var(&o.LinkGbps, "link-gbps", 0, "link rate limit per direction in Gbit/s (0: none)")
	linkRateAliases(f, &o.LinkGbps)
	f.StringVar(&o.Mix, "mix", "write=0.7,read=0.3", "TLP mix: weights of write (posted MWr), read (MRd) and cfg (CfgRd0)")
	bytesVar(f, &o.WriteSize, "write-size", 256, "payload bytes per posted write")
	bytesVar(f, &o.ReadSize, "read-size", 512, "bytes per read request")
	f.DurationVar(&o.Duration, "duration", 2*time.Second, "how long to issue traffic (with --virtual: 2ms of virtual time unless given)")
	f.IntVar(&o.Outstanding, "outstanding", linkbench.DefaultOutstanding, "reads in flight at most: up to 256 with 8-bit tags, up to 768 with 10-bit tags (the bridges then use them too)")
	bytesVar(f, &o.MTU, "mtu", 9000, "frame size limit from the dxpu header on (1472 for a 1500-byte Ethernet MTU)")
	f.IntVar(&o.Window, "window", bridge.DefaultWindow, "TLPs in flight per direction")
	f.Uint64Var(&o.Seed, "seed", 1, "seed of the traffic and fault draws")
	f.BoolVar(&o.Baseline, "baseline", true, "with faults, first run a lossless baseline and report the goodput ratio")
	f.BoolVar(&o.JSON, "json", false, "print one JSON object")
	f.BoolVar(&o.Keys, "keys", false, "seal the pair with a fresh key and compare it with the same pair unkeyed: 3 rounds alternating, each run a third of --duration, medians compared (plaintext_goodput_gbps, keyed_ratio, rounds)")
	f.StringVar(&o.SealMode, "seal-mode", "", "with --keys: gcm (default: encryption and integrity) or gmac (integrity only)")
	f.BoolVar(&o.Raw, "raw", true, "on a real-time run, measure raw UDP (two plain sockets, MTU-sized datagrams: before and after the pair) and TCP on the same loopback and report the pair's ratios")
	f.DurationVar(&o.RawFor, "raw-for", 0, "how long each raw baseline runs (default: --duration, at most 1s; the MTU flood half of it before the pair, half after)")
	f.DurationVar(&o.Spin, "spin", 0, "how long each bridge's runner polls its socket after its last frames before sleeping (as dxpu bridge --spin; 0: sleep at once)")
	f.BoolVar(&o.SharedSocket, "shared-socket", false, "run each bridge over a data-plane port shared by pairs, told apart by pair ID, as dxpu bridge agent does (shared_socket and pair_steered in the result)")
	f.BoolVar(&o.Virtual, "virtual", false, "run in virtual time on the simulator over in-memory links (deterministic; --duration is virtual, keep it to milliseconds)")
	f.DurationVar(&o.Interval, "interval", 50*time.Nanosecond, "with --virtual: one TLP issued every interval (open loop)")
	return cmd
}
