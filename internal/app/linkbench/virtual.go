package linkbench

import (
	"fmt"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/internal/app/units"
	"github.com/dxpu/dxpu/internal/pairsim"
)

// RunVirtual runs the same measurement in virtual time on the
// discrete-event simulator, over in-memory links with the same faults:
// deterministic from the seed, and free of the host machine's scheduling
// noise. The requester issues one TLP every interval (open loop; the
// bridges push back and a software queue absorbs the excess) for
// o.Duration of virtual time; the run then goes on until every TLP
// issued is delivered or answered (drainBound bounds that), so that a
// TLP still in flight is not judged lost.
func RunVirtual(o Options, interval time.Duration) (Result, error) {
	o.defaults()
	if err := o.checkSizes(); err != nil {
		return Result{}, err
	}
	if interval <= 0 {
		return Result{}, units.Errorf("linkbench: interval %v: want > 0", interval)
	}
	count := int(o.Duration / interval)
	if count < 1 || count > 2_000_000 {
		return Result{}, units.Errorf("linkbench: %v / %v = %d TLPs: want 1..2000000 (shorten --duration in virtual mode)", o.Duration, interval, count)
	}
	cfg := bridge.Config{MTU: o.MTU, MaxPayload: o.MaxPayload, Window: o.Window,
		MinRTO: 200 * time.Microsecond, InitialRTO: 2 * time.Millisecond, AckDelay: 10 * time.Microsecond, Key: o.Key, SealMode: o.SealMode,
		CompletionTimeout: completionTimeout}
	sc := pairsim.Scenario{
		Seed: o.Seed, Faults: o.Faults, Host: cfg, GPU: cfg, OneWay: true,
		Mix:   pairsim.Mix{Write: o.Write, Read: o.Read, Config: o.Config, WriteBytes: o.WriteBytes, ReadBytes: o.ReadBytes},
		Count: count, Interval: interval, MaxTime: 100*o.Duration + drainBound(o, cfg, count),
	}
	r := sc.Run()
	if r.Pair == nil {
		return Result{}, fmt.Errorf("linkbench: %v", r.Violations)
	}
	h, g := r.Host, r.GPU
	res := Result{
		Seconds:      r.End.Seconds(),
		GoodputGbps:  float64(h.PayloadIn+g.PayloadIn) * 8 / r.End.Seconds() / 1e9,
		WritesSent:   h.WritesSent,
		Delivered:    g.WritesRecv - g.Duplicated,
		Duplicated:   g.Duplicated,
		Misordered:   g.Misordered,
		ReadsSent:    h.ReadsSent,
		Completed:    h.Completed,
		Failed:       h.Failed,
		Unanswered:   h.Outstanding(),
		BadCpls:      h.BadCpls + h.ExtraCpls,
		WriteLatency: percentiles(g.WriteLatency),
		ReadLatency:  percentiles(h.ReadLatency),
		Host:         BridgeCounters(r.Pair.Host.Bridge.Counters()),
		GPU:          BridgeCounters(r.Pair.GPU.Bridge.Counters()),
		Link:         &[2]LinkStats{LinkStats(r.Pair.H2G.Stats), LinkStats(r.Pair.G2H.Stats)},
	}
	res.Lost = res.WritesSent - res.Delivered
	res.ReportedLost = len(h.LostReported)
	res.LinkDowns = int(res.Host.LinkDowns + res.GPU.LinkDowns)
	res.Retransmits = res.Host.Retransmits + res.GPU.Retransmits
	res.RTOs = res.Host.RTOs + res.GPU.RTOs
	res.ReadsTimedOut, res.LateCompletions = int(res.Host.CompletionTimeouts), int(res.Host.LateCompletions)
	res.CompletionTimeoutMs = float64(completionTimeout) / 1e6
	for _, v := range r.Violations {
		res.Events = append(res.Events, "violation: "+v)
	}
	return res, nil
}

// drainBound is how much virtual time RunVirtual allows beyond its
// issuing phase for the TLPs in flight to arrive and be answered. The
// pair moves at most a window (or a set of header credits) per round
// trip, so a long --delay drains slowly: every round is bounded by the
// round trip plus the largest retransmission timeout, and the link's
// dead-after and the completion timeout may each pass once more on top.
// With a rate limit, the bytes' serialization counts too. The run stops
// as soon as the pair is quiet, so a generous bound costs nothing on a
// run that drains.
func drainBound(o Options, cfg bridge.Config, count int) time.Duration {
	perRound := min(o.Window, cfg.Defaults().Credits[0].Headers)
	if perRound < 1 {
		perRound = 1
	}
	rounds := time.Duration(2*(count/perRound) + 4)
	maxRTO, deadAfter := cfg.MaxRTO, cfg.DeadAfter
	if maxRTO == 0 {
		maxRTO = 20 * time.Millisecond // bridge.Config's default
	}
	if deadAfter == 0 {
		deadAfter = 10 * time.Millisecond // bridge.Config's default
	}
	d := rounds*(2*o.Faults.Delay) + 4*maxRTO + 2*deadAfter + 2*completionTimeout
	if bw := o.Faults.Bandwidth; bw > 0 {
		bytes := float64(count) * float64(max(o.WriteBytes, o.ReadBytes)+64)
		d += 2 * time.Duration(bytes*8/bw*float64(time.Second))
	}
	return d
}
