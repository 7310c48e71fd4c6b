package linkbench

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/memlink"
	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/bridge/udp"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/app/progress"
	"github.com/dxpu/dxpu/internal/app/rawgoodput"
	"github.com/dxpu/dxpu/internal/app/units"
)

// Report is what `dxpu bench link` prints: the run, its faults, and the
// lossless baseline when there was one.
type Report struct {
	Result
	Faults  Faults `json:"faults"`
	Virtual bool   `json:"virtual"`
	// SpinUs is --spin: how long each runner polled its socket after its
	// last frames before sleeping (0: at once).
	SpinUs float64 `json:"spin_us"`
	// SharedSocket is --shared-socket: each bridge ran over a data-plane
	// socket shared by pairs (udp.Mux), as `dxpu bridge agent` runs them.
	SharedSocket    bool    `json:"shared_socket"`
	MTUBytes        int     `json:"mtu_bytes"` // the pair's frames, from the dxpu header on
	Baseline        *Result `json:"baseline,omitempty"`
	BaselineGoodput float64 `json:"baseline_goodput_gbps,omitempty"`
	GoodputRatio    float64 `json:"goodput_ratio,omitempty"`
	// With --keys: the run is keyed (SealMode) and Plaintext the same run
	// unkeyed; they alternate Rounds times and the runs of median goodput
	// are reported, KeyedRatio keyed over plaintext.
	Keyed                bool    `json:"keyed"`
	SealMode             string  `json:"seal_mode,omitempty"`
	Plaintext            *Result `json:"plaintext,omitempty"`
	PlaintextGoodputGbps float64 `json:"plaintext_goodput_gbps,omitempty"`
	KeyedRatio           float64 `json:"keyed_ratio,omitempty"`
	Rounds               int     `json:"rounds,omitempty"` // plaintext and keyed runs alternated, medians compared
	InvariantsHold       bool    `json:"invariants_hold"`
	// Raw baselines of real-time runs, measured after the pair on the
	// same loopback: two plain UDP sockets flooded with datagrams of
	// the pair's MTU (sendmmsg/recvmmsg, the bridges' calls, in this
	// process, without the bridges' UDP segmentation offload), and one
	// TCP connection. PairOverUDP is the lossless
	// pair's goodput (the baseline with faults, the plaintext with
	// --keys, else the run) over UDP's; PairOverTCP likewise.
	//
	// The UDP flood runs twice, half of RawFor each: just before the
	// pair's first run (UDPBefore) and just after its last (UDP), and
	// UDPGoodputGbps is their mean. A shared machine's speed drifts: on
	// one 2-core VM the same flood measured 12-14 Gbit/s for minutes and
	// then 7-8 (its CPU per GB half as much again), and a flood only
	// after the pair moved the ratio from 0.5x to 0.86x for the same
	// pair goodput. Two figures far apart (UDPDrift) say the run is not
	// to be compared.
	UDP            *rawgoodput.UDPResult `json:"udp,omitempty"`
	UDPBefore      *rawgoodput.UDPResult `json:"udp_before,omitempty"`
	UDPGoodputGbps float64               `json:"udp_goodput_gbps,omitempty"`
	// UDPCPUSecondsPerGB is the floods' mean CPU seconds per GB.
	UDPCPUSecondsPerGB float64 `json:"udp_cpu_s_per_gb,omitempty"`
	// UDPDrift is the larger of the two floods' goodput over the smaller.
	UDPDrift       float64 `json:"udp_drift_ratio,omitempty"`
	TCPGoodputGbps float64 `json:"tcp_goodput_gbps,omitempty"`
	PairOverUDP    float64 `json:"pair_over_udp,omitempty"`
	PairOverTCP    float64 `json:"pair_over_tcp,omitempty"`
	// PairCPUOverUDP is the lossless pair's CPU seconds per GB over the
	// UDP flood's (both in this process, same run): what a byte costs
	// through the bridges against a plain socket's.
	PairCPUOverUDP float64 `json:"pair_cpu_over_udp,omitempty"`
	// The pair fills its frames only as far as its queue allows: UDP
	// again with datagrams of the mean frame (bytes sent over frames
	// sent, ACK frames included), PairFrameBytes, of the side that sent
	// more bytes (PairFrameSide: host, or gpu for a read-heavy mix,
	// whose host side sends little more than requests).
	PairFrameBytes        int                   `json:"pair_frame_bytes,omitempty"`
	PairFrameSide         string                `json:"pair_frame_side,omitempty"`
	UDPSameFrames         *rawgoodput.UDPResult `json:"udp_same_frames,omitempty"`
	UDPSameFramesGbps     float64               `json:"udp_same_frames_goodput_gbps,omitempty"`
	PairOverUDPSameFrames float64               `json:"pair_over_udp_same_frames,omitempty"`
}

// ReportOptions are `dxpu bench link`'s.
type ReportOptions struct {
	Loss, Dup, Reorder, Corrupt float64 // fault probabilities, each direction
	Delay                       time.Duration
	LinkGbps                    float64 // rate limit per direction in Gbit/s (0: none)
	BW                          string  // deprecated --bw: bit/s with an optional K, M or G suffix ("": none)
	Mix                         string  // write=0.7,read=0.3 ...
	WriteSize, ReadSize         int
	Duration                    time.Duration
	Outstanding, MTU, Window    int
	Seed                        uint64
	Baseline                    bool // with faults, first a lossless baseline
	JSON                        bool
	Keys                        bool          // seal the pair (a fresh random key) and compare with plaintext
	SealMode                    string        // with Keys: gcm (default) or gmac
	Virtual                     bool          // virtual time on the simulator
	Interval                    time.Duration // with Virtual: one TLP every interval
	Spin                        time.Duration // real time: the runners poll this long after their last frames
	SharedSocket                bool          // real time: each side's bridge on an agent's shared data-plane socket (udp.Mux)
	// Raw measures the raw UDP and TCP baselines after a real-time run
	// (for RawFor: the duration up to 1 s when zero).
	Raw      bool
	RawFor   time.Duration
	Progress io.Writer // when a terminal: which run is going (package progress)
}

// WriteReport runs the measurement (after a baseline when asked) and
// prints the report to out. Bad options and failed runs are
// apperr.ErrUsage; broken delivery invariants are apperr.ErrFailed.
func WriteReport(ctx context.Context, ro ReportOptions, w io.Writer) error {
	fl := &ro
	for _, p := range []struct {
		name string
		v    float64
	}{{"loss", fl.Loss}, {"dup", fl.Dup}, {"reorder", fl.Reorder}, {"corrupt", fl.Corrupt}} {
		if !(p.v >= 0 && p.v <= 1) { // NaN fails too
			return apperr.Usage(fmt.Errorf("--%s %v: want a probability from 0 to 1", p.name, p.v))
		}
	}
	if err := checkRanges(fl); err != nil {
		return apperr.Usage(err)
	}
	bw, err := parseBandwidth(fl.BW)
	if err != nil {
		return apperr.Usage(err)
	}
	if fl.LinkGbps > 0 {
		bw = fl.LinkGbps * 1e9
	}
	o := Options{
		Faults:      memlink.Faults{Loss: fl.Loss, Duplicate: fl.Dup, Reorder: fl.Reorder, Corrupt: fl.Corrupt, Delay: fl.Delay, Bandwidth: bw},
		WriteBytes:  fl.WriteSize,
		ReadBytes:   fl.ReadSize,
		Duration:    fl.Duration,
		Outstanding: fl.Outstanding,
		MTU:         fl.MTU,
		Window:      fl.Window,
		Seed:        fl.Seed,
		Spin:        fl.Spin,

		SharedSocket: fl.SharedSocket,
	}
	if err := parseMix(fl.Mix, &o); err != nil {
		return apperr.Usage(err)
	}
	// Everything a run would refuse is refused here, before the first
	// flood: a seal mode, and what the bridges' configuration takes.
	var sealName string
	switch {
	case fl.Keys:
		if sealName = fl.SealMode; sealName == "" {
			sealName = "gcm"
		}
		mode, err := seal.ParseMode(sealName)
		if err != nil {
			return apperr.Usage(err)
		}
		o.SealMode = mode
	case fl.SealMode != "":
		return apperr.Usage(errors.New("--seal-mode needs --keys"))
	}
	if err := checkPairConfig(o, fl.Keys); err != nil {
		return apperr.Usage(err)
	}
	faulty := o.Faults.Loss+o.Faults.Duplicate+o.Faults.Reorder+o.Faults.Corrupt > 0
	runs := 1
	switch {
	case fl.Keys:
		runs = 2 * keyRounds
	case fl.Baseline && faulty:
		runs = 2
	}
	bar := progress.New(fl.Progress, runs, "")
	defer bar.Finish()
	run := func(what string, o Options) (Result, error) {
		bar.Describe(fmt.Sprintf("%s, %s", what, units.Duration(o.Duration)))
		defer bar.Add(1)
		if fl.Virtual {
			return RunVirtual(o, fl.Interval)
		}
		return Run(ctx, o)
	}
	out := Report{Faults: Faults(o.Faults), Virtual: fl.Virtual, SpinUs: float64(fl.Spin) / 1e3, SharedSocket: fl.SharedSocket, MTUBytes: cmp.Or(o.MTU, DefaultMTU)}
	if err := rawBefore(ctx, fl, o, &out); err != nil {
		return apperr.Usage(err)
	}
	if fl.Keys {
		out.SealMode = sealName
		// Plaintext and keyed alternate in three rounds of a third of
		// the duration each, so that a change of load on a shared machine
		// falls on both; the medians are compared.
		key := make([]byte, seal.KeyLen)
		if _, err := rand.Read(key); err != nil {
			return err
		}
		ro := o
		if !fl.Virtual {
			ro.Duration = max(o.Duration/keyRounds, 50*time.Millisecond)
		}
		var plain, keyed []Result
		for range keyRounds {
			ro.Key = nil
			p, err := run("plaintext run", ro)
			if err != nil {
				return apperr.Usage(err)
			}
			plain = append(plain, p)
			ro.Key = key
			k, err := run("keyed run", ro)
			if err != nil {
				return apperr.Usage(err)
			}
			keyed = append(keyed, k)
		}
		pm, km := medianRun(plain), medianRun(keyed)
		out.Plaintext, out.PlaintextGoodputGbps = &pm, pm.GoodputGbps
		out.Keyed, out.Rounds = true, keyRounds
		if pm.GoodputGbps > 0 {
			out.KeyedRatio = km.GoodputGbps / pm.GoodputGbps
		}
		out.Result = km
		out.InvariantsHold = allOK(plain) && allOK(keyed)
		if err := rawBaselines(ctx, fl, o, &out, pm); err != nil {
			return apperr.Usage(err)
		}
		return writeOut(w, fl, o, out)
	}
	if fl.Baseline && faulty {
		bo := o
		// The baseline keeps the delay and bandwidth: only the faults go.
		bo.Faults = memlink.Faults{Delay: o.Faults.Delay, Bandwidth: o.Faults.Bandwidth}
		b, err := run("lossless baseline", bo)
		if err != nil {
			return apperr.Usage(err)
		}
		out.Baseline = &b
		out.BaselineGoodput = b.GoodputGbps
	}
	what := "run"
	if faulty {
		what = "run with the faults"
	}
	r, err := run(what, o)
	if err != nil {
		return apperr.Usage(err)
	}
	out.Result = r
	out.InvariantsHold = r.OK() && (out.Baseline == nil || out.Baseline.OK())
	if out.Baseline != nil && out.Baseline.GoodputGbps > 0 {
		out.GoodputRatio = r.GoodputGbps / out.Baseline.GoodputGbps
	}
	lossless := r
	if out.Baseline != nil {
		lossless = *out.Baseline
	}
	if err := rawBaselines(ctx, fl, o, &out, lossless); err != nil {
		return apperr.Usage(err)
	}
	return writeOut(w, fl, o, out)
}

// rawFor is how long the raw baselines run: each UDP flood half of it.
func rawFor(fl *ReportOptions, o Options) time.Duration {
	if fl.RawFor > 0 {
		return fl.RawFor
	}
	return min(o.Duration, time.Second)
}

// udpFlood floods two plain UDP sockets on 127.0.0.1 with datagrams of
// size bytes for d.
func udpFlood(ctx context.Context, size int, d time.Duration) (rawgoodput.UDPResult, error) {
	lo := netip.MustParseAddrPort("127.0.0.1:0")
	rx, err := udp.Listen(lo, netip.AddrPort{})
	if err != nil {
		return rawgoodput.UDPResult{}, err
	}
	tx, err := udp.Listen(lo, rx.LocalAddr())
	if err != nil {
		rx.Close()
		return rawgoodput.UDPResult{}, err
	}
	rx.SetPeer(tx.LocalAddr())
	return rawgoodput.UDP(ctx, tx, rx, size, nil, d)
}

// rawBefore runs, on a real-time run with Raw, the first of the two MTU
// floods, just before the pair.
func rawBefore(ctx context.Context, fl *ReportOptions, o Options, out *Report) error {
	if fl.Virtual || !fl.Raw {
		return nil
	}
	u, err := udpFlood(ctx, o.MTU, max(rawFor(fl, o)/2, time.Millisecond))
	if err != nil {
		return err
	}
	out.UDPBefore = &u
	return nil
}

// rawBaselines measures, on a real-time run with Raw, UDP between two
// plain sockets on 127.0.0.1 with datagrams of the pair's MTU (the second
// flood, after rawBefore's) and of its mean frame, and TCP on the same
// loopback, and the pair's ratios to them.
func rawBaselines(ctx context.Context, fl *ReportOptions, o Options, out *Report, lossless Result) error {
	if fl.Virtual || !fl.Raw {
		return nil
	}
	d := rawFor(fl, o)
	u, err := udpFlood(ctx, o.MTU, max(d/2, time.Millisecond))
	if err != nil {
		return err
	}
	pair := lossless.GoodputGbps
	out.UDP, out.UDPGoodputGbps = &u, u.GoodputGbps
	cpu := u.CPUSecondsPerGB
	if b := out.UDPBefore; b != nil {
		br := rawgoodput.Bracket{Before: *b, After: u}
		out.UDPGoodputGbps, out.UDPDrift, cpu = br.GoodputGbps(), br.Drift(), br.CPUSecondsPerGB()
	}
	out.PairOverUDP, out.UDPCPUSecondsPerGB = pair/out.UDPGoodputGbps, cpu
	if cpu > 0 {
		out.PairCPUOverUDP = lossless.CPUSecondsPerGB / cpu
	}
	side, c := "host", lossless.Host
	if g := lossless.GPU; g.BytesSent > c.BytesSent {
		side, c = "gpu", g
	}
	if c.FramesSent > 0 {
		out.PairFrameBytes, out.PairFrameSide = int(c.BytesSent/c.FramesSent), side
		s, err := udpFlood(ctx, max(out.PairFrameBytes, 1), d)
		if err != nil {
			return err
		}
		out.UDPSameFrames, out.UDPSameFramesGbps, out.PairOverUDPSameFrames = &s, s.GoodputGbps, pair/s.GoodputGbps
	}
	tcp, err := rawgoodput.TCPLoopback(ctx, d)
	if err != nil {
		return err
	}
	out.TCPGoodputGbps, out.PairOverTCP = tcp, pair/tcp
	return nil
}

// keyRounds is how many plaintext and keyed runs --keys alternates.
const keyRounds = 3

// medianRun is the run of median goodput.
func medianRun(rs []Result) Result {
	s := append([]Result(nil), rs...)
	sort.Slice(s, func(i, j int) bool { return s[i].GoodputGbps < s[j].GoodputGbps })
	return s[len(s)/2]
}

func allOK(rs []Result) bool {
	for _, r := range rs {
		if !r.OK() {
			return false
		}
	}
	return true
}

// writeOut prints the report and turns broken invariants into ErrFailed.
func writeOut(w io.Writer, fl *ReportOptions, o Options, out Report) error {
	r := out.Result
	if fl.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return apperr.Usage(err)
		}
	} else {
		f := o.Faults
		link := "no limit"
		if f.Bandwidth > 0 {
			link = fmt.Sprintf("%g Gbit/s", f.Bandwidth/1e9)
		}
		fmt.Fprintf(w, "faults: loss %g dup %g reorder %g corrupt %g delay %s link %s\n", f.Loss, f.Duplicate, f.Reorder, f.Corrupt, units.Duration(f.Delay), link)
		if b := out.Baseline; b != nil {
			fmt.Fprintf(w, "baseline (same delay and bandwidth, no faults): goodput %.3f Gbit/s\n", b.GoodputGbps)
		}
		if p := out.Plaintext; p != nil {
			fmt.Fprintf(w, "plaintext (the same runs unkeyed, alternating, median of %d): goodput %.3f Gbit/s; keyed (%s) below: %.2fx of it\n", out.Rounds, p.GoodputGbps, out.SealMode, out.KeyedRatio)
		}
		if out.SharedSocket {
			how := "each pair's frames through the mux's queues"
			if out.PairSteered {
				how = "the kernel steering the pair's frames to a socket of its own on the port"
			}
			fmt.Fprintf(w, "each bridge on a data-plane port shared by pairs, as dxpu bridge agent runs them (--shared-socket): %s\n", how)
		}
		if o.Spin > 0 {
			fmt.Fprintf(w, "runners poll their sockets %s after their last frames before sleeping (--spin)\n", units.Duration(o.Spin))
		}
		fmt.Fprintf(w, "goodput %.3f Gbit/s over %.6f s", r.GoodputGbps, r.Seconds)
		if r.CPUSecondsPerGB > 0 {
			fmt.Fprintf(w, ", %.2f CPU s per GB", r.CPUSecondsPerGB)
		}
		if out.GoodputRatio > 0 {
			fmt.Fprintf(w, " (%.0f%% of baseline)", 100*out.GoodputRatio)
		}
		fmt.Fprintln(w)
		writeLatency(w, "write latency (one way)", "writes", r.WriteLatency)
		writeLatency(w, "read latency (round trip)", "reads", r.ReadLatency)
		if r.MaxReadsInFlight > 0 {
			tags := "8-bit tags"
			if r.MaxWireTag >= 256 {
				tags = "10-bit tags"
			}
			fmt.Fprintf(w, "reads in flight: up to %d of --outstanding %d (%s)\n", r.MaxReadsInFlight, o.Outstanding, tags)
		}
		lostOnLink := "" // no fault layer: nothing lost on the way
		if r.Link != nil {
			lostOnLink = fmt.Sprintf(", frames lost on the link %d", r.Link[0].Lost+r.Link[1].Lost)
		}
		fmt.Fprintf(w, "retransmits %d, RTOs %d (an RTO probes the peer first and resends only what its answer shows missing)%s\n",
			r.Retransmits, r.RTOs, lostOnLink)
		fmt.Fprintf(w, "delivered %d lost %d (reported %d, link downs %d) duplicated %d misordered %d unanswered %d (reads %d ok, %d failed)\n",
			r.Delivered, r.Lost, r.ReportedLost, r.LinkDowns, r.Duplicated, r.Misordered, r.Unanswered, r.Completed, r.Failed)
		if why := whyReadsFailed(&r, out.Virtual); why != "" {
			fmt.Fprintln(w, why)
		}
		if u := out.UDP; u != nil {
			when := fmt.Sprintf("after the pair: %.3f Gbit/s (%d of %d datagrams arrived)", u.GoodputGbps, u.Received, u.Sent)
			if b := out.UDPBefore; b != nil {
				when = fmt.Sprintf("before and after the pair: %.3f and %.3f, mean %.3f Gbit/s", b.GoodputGbps, u.GoodputGbps, out.UDPGoodputGbps)
			}
			fmt.Fprintf(w, "raw UDP (two plain sockets, %d-byte datagrams, same loopback, %s); the lossless pair %.2fx of it\n",
				u.DatagramBytes, when, out.PairOverUDP)
			if warn := rawgoodput.DriftWarning(out.UDPDrift); warn != "" {
				fmt.Fprintln(w, warn)
			}
			if out.PairCPUOverUDP > 0 {
				fmt.Fprintf(w, "CPU per GB: raw UDP %.2f s; the lossless pair %.1fx of it\n", out.UDPCPUSecondsPerGB, out.PairCPUOverUDP)
			}
			if s := out.UDPSameFrames; s != nil {
				fmt.Fprintf(w, "raw UDP again with the pair's mean frame (%d bytes, the %s side's): %.3f Gbit/s; the lossless pair %.2fx of it\n",
					s.DatagramBytes, out.PairFrameSide, s.GoodputGbps, out.PairOverUDPSameFrames)
			}
			fmt.Fprintf(w, "raw TCP (one connection, same loopback): %.3f Gbit/s; the lossless pair %.2fx of it\n", out.TCPGoodputGbps, out.PairOverTCP)
		}
	}
	if !out.InvariantsHold {
		return apperr.Failed(fmt.Errorf("bench link: invariants broken: lost %d (reported %d) duplicated %d misordered %d unanswered %d",
			r.Lost, r.ReportedLost, r.Duplicated, r.Misordered, r.Unanswered))
	}
	return nil
}

// whyReadsFailed explains failed reads, or says nothing when none failed:
// how many the host side's bridge timed out, how many of those were
// answered late, and, on a real-time run, the longest stall of the
// process, which on a loaded machine is what outlasts the timeout.
func whyReadsFailed(r *Result, virtual bool) string {
	if r.Failed == 0 {
		return ""
	}
	s := fmt.Sprintf("reads failed %d: %d timed out at the %g ms completion timeout (the bridge answered CA)",
		r.Failed, r.ReadsTimedOut, r.CompletionTimeoutMs)
	if r.LateCompletions > 0 {
		s += fmt.Sprintf(", %d of whose completions arrived after it", r.LateCompletions)
	}
	if other := r.Failed - r.ReadsTimedOut; other > 0 {
		s += fmt.Sprintf("; %d failed otherwise (link down: see events)", other)
	}
	if !virtual && r.ReadsTimedOut > 0 {
		s += fmt.Sprintf("; this process stalled up to %.1f ms (a busy machine)", r.MaxStallMs)
		if r.MaxStallMs >= r.CompletionTimeoutMs && r.LinkDowns == 0 {
			s += ", past the timeout: the machine, not the link"
		}
	}
	return s
}

// Bounds of the flags checkRanges holds to.
const (
	maxUDPPayload = 65507 // an IPv4 UDP datagram's payload
	maxMixWeight  = 1e6
)

// checkRanges refuses values no run can use, naming the flag.
// MaxDelay bounds --delay: a one-way delay beyond a second is no network
// the pair is meant for, and a virtual run drains for a multiple of it.
const MaxDelay = time.Second

func checkRanges(fl *ReportOptions) error {
	switch {
	case !(fl.LinkGbps >= 0 && fl.LinkGbps <= 10000): // NaN fails too
		return fmt.Errorf("--link-gbps %g: want a number of Gbit/s from 0 (no limit) up to 10000", fl.LinkGbps)
	case fl.LinkGbps > 0 && fl.BW != "":
		return errors.New("--link-gbps and --bw (deprecated) exclude each other")
	case fl.Delay < 0 || fl.Delay > MaxDelay:
		return units.Errorf("--delay %v: want 0 up to %v", fl.Delay, MaxDelay)
	case fl.Duration <= 0:
		return units.Errorf("--duration %v: must be positive", fl.Duration)
	case fl.RawFor < 0:
		return units.Errorf("--raw-for %v: must not be negative (0: --duration, at most 1s)", fl.RawFor)
	case fl.WriteSize < MinWriteBytes || fl.WriteSize > MaxPayload || fl.WriteSize%4 != 0:
		// A write carries its number and its time (8 bytes each), and
		// the bridges' MPS bounds it.
		return fmt.Errorf("--write-size %d: want a multiple of 4 in %d..%d bytes (the bridges' MPS)", fl.WriteSize, MinWriteBytes, MaxPayload)
	case fl.ReadSize < 4 || fl.ReadSize > 4096 || fl.ReadSize%4 != 0:
		return fmt.Errorf("--read-size %d: want a multiple of 4 in 4..4096 bytes", fl.ReadSize)
	case fl.Outstanding < 1 || fl.Outstanding > MaxOutstanding:
		return fmt.Errorf("--outstanding %d: want 1..%d reads (over 256: 10-bit tags)", fl.Outstanding, MaxOutstanding)
	case fl.MTU < 128 || fl.MTU > 65535:
		return fmt.Errorf("--mtu %d: want 128..65535 bytes", fl.MTU)
	case !fl.Virtual && fl.MTU > maxUDPPayload:
		return fmt.Errorf("--mtu %d: a real-time run sends its frames in UDP datagrams, at most %d bytes", fl.MTU, maxUDPPayload)
	case fl.Window < 1 || fl.Window > bridge.MaxWindow:
		return fmt.Errorf("--window %d: want 1..%d TLPs", fl.Window, bridge.MaxWindow)
	case fl.Spin < 0 || fl.Spin > driver.MaxSpin:
		return units.Errorf("--spin %v: want 0 up to %v", fl.Spin, driver.MaxSpin)
	case fl.Virtual && fl.Spin != 0:
		return errors.New("--spin polls real sockets: not with --virtual")
	case fl.Virtual && fl.SharedSocket:
		return errors.New("--shared-socket is a real socket: not with --virtual")
	case fl.SharedSocket && fl.MTU > udp.MuxMaxFrame:
		return fmt.Errorf("--mtu %d: with --shared-socket want at most %d (the data plane's receive buffers, as dxpu bridge agent)", fl.MTU, udp.MuxMaxFrame)
	case fl.Virtual && fl.Interval <= 0:
		return units.Errorf("--interval %v: must be positive", fl.Interval)
	}
	return nil
}

func parseBandwidth(s string) (float64, error) {
	if s == "" {
		return 0, nil
	}
	mult, num := 1.0, s
	switch strings.ToUpper(s[len(s)-1:]) {
	case "K":
		mult = 1e3
	case "M":
		mult = 1e6
	case "G":
		mult = 1e9
	}
	if mult != 1 {
		num = s[:len(s)-1]
	}
	v, err := strconv.ParseFloat(num, 64)
	v *= mult
	// NaN fails the comparison; Inf (also 1e308G) is no rate either.
	if err != nil || !(v > 0 && !math.IsInf(v, 0)) {
		return 0, fmt.Errorf("--bw %q: want a finite positive number of bit/s with an optional K, M or G suffix", s)
	}
	return v, nil
}

func parseMix(s string, o *Options) error {
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		w, err := strconv.ParseFloat(v, 64)
		// NaN fails the comparison; a weight so large that the sum
		// overflows would draw every TLP of one kind.
		if !ok || err != nil || !(w >= 0 && w <= maxMixWeight) {
			return fmt.Errorf("--mix: %q: want name=weight with a weight from 0 to %.0f", part, float64(maxMixWeight))
		}
		switch k {
		case "write":
			o.Write = w
		case "read":
			o.Read = w
		case "cfg", "config":
			o.Config = w
		default:
			return fmt.Errorf("--mix: unknown TLP kind %q (want write, read or cfg)", k)
		}
	}
	if o.Write+o.Read+o.Config == 0 {
		return fmt.Errorf("--mix %q: all weights are 0", s)
	}
	return nil
}

// writeLatency prints one latency line, or says there was nothing to time.
func writeLatency(w io.Writer, what, none string, p Percentiles) {
	if p.Count == 0 {
		fmt.Fprintf(w, "%s: no %s\n", what, none)
		return
	}
	fmt.Fprintf(w, "%s us: p50 %.1f p90 %.1f p99 %.1f p99.9 %.1f max %.1f (%d)\n", what, p.P50, p.P90, p.P99, p.P999, p.Max, p.Count)
}
