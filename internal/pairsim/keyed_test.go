package pairsim

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/bridge/vpair"
)

// keyedMTU is the smallest MTU randomScenario's configs may use keyed: a
// 532-byte TLP, its length, the header and the seal's overhead.
const keyedMTU = 40 + 2 + 532 + seal.Overhead

// keyedScenario is randomScenario with both bridges holding a pair key,
// small RekeyAfter and RekeyGrace so senders move epochs during the runs,
// rekeys on demand from either side at random times, on a third of
// the seeds a manager key change mid-run, and on half of them corrupted
// frames passed on to the bridges (the seal must refuse the bit flips the
// NIC would have caught).
func keyedScenario(seed uint64) Scenario {
	sc := randomScenario(seed)
	r := rand.New(rand.NewPCG(seed, 0x5ea1))
	key := make([]byte, seal.KeyLen)
	for i := range key {
		key[i] = byte(r.Uint32())
	}
	mode := []seal.Mode{seal.ModeGCM, seal.ModeGMAC}[r.IntN(2)]
	for _, c := range []*bridge.Config{&sc.Host, &sc.GPU} {
		c.Key, c.SealMode, c.RequireKeys = key, mode, true
		// Small enough to move epochs in every run, large enough that a
		// side sending into a short flap (its window, probes and
		// keepalives) does not reach the hard limit of 2 * RekeyAfter
		// frames without the peer's echo: with the default credits a
		// window of 256 is all in flight, and its retransmissions twice
		// over passed 2 * 256.
		c.RekeyAfter, c.RekeyGrace = uint64(max(256, 2*c.Window)), 16
		c.MTU = max(c.MTU, keyedMTU)
	}
	sc.Faults.PassCorrupt = r.IntN(2) == 0
	type call struct {
		at   time.Duration
		host bool
	}
	var rekeys []call
	for range 1 + r.IntN(6) {
		rekeys = append(rekeys, call{time.Duration(r.IntN(1500)) * time.Microsecond, r.IntN(2) == 0})
	}
	change := r.IntN(3) == 0
	changeAt := time.Duration(r.IntN(1000)) * time.Microsecond
	activateHost := r.IntN(2) == 0
	newKey := make([]byte, seal.KeyLen)
	for i := range newKey {
		newKey[i] = byte(r.Uint32())
	}
	sc.Setup = func(p *vpair.Pair) {
		side := func(host bool) *vpair.Side {
			if host {
				return p.Host
			}
			return p.GPU
		}
		for _, c := range rekeys {
			p.Sim.At(c.at, func() {
				sd := side(c.host)
				if err := sd.Bridge.Rekey(); err != nil {
					panic(err) // keyed bridges never refuse
				}
				sd.Kick()
			})
		}
		if change {
			p.Sim.At(changeAt, func() {
				for _, sd := range []*vpair.Side{p.Host, p.GPU} {
					if err := sd.Bridge.InstallKey(1, newKey); err != nil {
						panic(err)
					}
				}
				if err := side(activateHost).Bridge.ActivateKey(); err != nil {
					panic(err)
				}
				p.Host.Kick()
				p.GPU.Kick()
			})
		}
	}
	return sc
}

// TestPropertySeededKeyed is TestPropertySeeded with keys on: under loss,
// duplication, reordering, corruption passed to the bridges, link flaps,
// epoch moves every few dozen frames, rekeys on demand and key changes,
// every posted write arrives exactly once and in order (or, after a link
// down only, is reported lost), every request gets exactly one final
// completion, and every run finishes. Runs without a long flap never go
// down and lose nothing; no frame a bridge sealed fails authentication
// (only corrupted ones do).
func TestPropertySeededKeyed(t *testing.T) {
	t.Parallel()
	n := seedCount()
	var rekeys, changes, corrupted, forged, replayed, lost, downs uint64
	for i := 0; i < n; i++ {
		seed := *firstSeed + uint64(i)
		sc := keyedScenario(seed)
		sc.CheckInvariants = i%10 == 0
		r := sc.Run()
		if len(r.Violations) > 0 {
			t.Fatalf("seed %d (faults %+v flaps %v): %v", seed, sc.Faults, sc.Flaps, r)
		}
		long := false
		for _, f := range sc.Flaps {
			long = long || f.For >= 5*time.Millisecond
		}
		nLost := uint64(len(r.Host.LostReported) + len(r.GPU.LostReported))
		if !long && (r.LinkDowns > 0 || nLost > 0) {
			t.Fatalf("seed %d (flaps %v): %d link downs, %d writes lost without a long flap: %v", seed, sc.Flaps, r.LinkDowns, nLost, r)
		}
		hc, gc := r.Pair.Host.Bridge.Counters(), r.Pair.GPU.Bridge.Counters()
		// A side sending into a long one-way outage hears echoes of its
		// old epoch only and stops at the hard limit: those frames would
		// have been lost anyway, and the link goes down. Otherwise the
		// seal never refuses.
		if !long && hc.SealFailures+gc.SealFailures > 0 {
			t.Fatalf("seed %d: %d frames the seal refused (key exhausted) without a long flap: %v", seed, hc.SealFailures+gc.SealFailures, r)
		}
		flips := r.Pair.H2G.Stats.Corrupted + r.Pair.G2H.Stats.Corrupted
		if !sc.Faults.PassCorrupt {
			flips = 0
		}
		bad := hc.DroppedForged + gc.DroppedForged + hc.DroppedSealMalformed + gc.DroppedSealMalformed +
			hc.DroppedUnsealed + gc.DroppedUnsealed + hc.DroppedHandshakeType + gc.DroppedHandshakeType
		if bad > flips {
			t.Fatalf("seed %d: %d frames refused as forged or malformed, only %d corrupted on the way", seed, bad, flips)
		}
		rekeys += hc.TxRekeys + gc.TxRekeys
		changes += hc.KeyActivations + gc.KeyActivations
		corrupted += flips
		forged += hc.DroppedForged + gc.DroppedForged
		replayed += hc.DroppedReplayed + gc.DroppedReplayed
		lost += nLost
		downs += uint64(r.LinkDowns)
	}
	t.Logf("%d keyed runs: %d epoch moves, %d key activations, %d corrupted frames passed on, %d refused as forged, %d as replayed; %d link downs, %d writes reported lost after them",
		n, rekeys, changes, corrupted, forged, replayed, downs, lost)
	if forged == 0 || replayed == 0 || changes == 0 || rekeys < uint64(n) {
		t.Fatal("the runs exercised too few forged-tag refusals, replay refusals, key changes or epoch moves (want one a run)")
	}
}
