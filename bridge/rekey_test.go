package bridge

import (
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/tlp/encap"
)

// trafficUnderKeyChanges sends writes both ways over a keyed pair that
// loses every fifth TLP frame, calling change every few rounds, and checks
// that every write arrives once and in order with the link up throughout.
func trafficUnderKeyChanges(t *testing.T, p *testPair, rounds int, change func(round int)) {
	t.Helper()
	n := 0
	p.drop = func(b *Bridge, f []byte) bool {
		if encap.Header(f).Type() != encap.MsgTLP {
			return false
		}
		n++
		return n%5 == 0
	}
	for r := 0; r < rounds; r++ {
		p.send(p.h, mwr(0x10000+uint64(r)*0x100, 64))
		p.send(p.h, mwr(0x10000+uint64(r)*0x100+0x40, 64))
		p.send(p.g, mwr(0x80000+uint64(r)*0x100, 32))
		change(r)
		p.advance(20*time.Microsecond, 10*time.Microsecond)
	}
	p.drop = nil
	p.advance(5*time.Millisecond, 50*time.Microsecond)
	if len(p.gq) != 2*rounds || len(p.hq) != rounds {
		t.Fatalf("delivered %d of %d host writes, %d of %d GPU writes", len(p.gq), 2*rounds, len(p.hq), rounds)
	}
	for i, d := range p.gq {
		if a, want := d.v().Address(), 0x10000+uint64(i/2)*0x100+uint64(i%2)*0x40; a != want {
			t.Fatalf("host write %d arrived at %#x, want %#x: lost, duplicated or reordered", i, a, want)
		}
	}
	for i, d := range p.hq {
		if a, want := d.v().Address(), 0x80000+uint64(i)*0x100; a != want {
			t.Fatalf("GPU write %d arrived at %#x, want %#x", i, a, want)
		}
	}
	for _, b := range []*Bridge{p.h, p.g} {
		c := b.Counters()
		if c.LinkDowns != 0 || c.PostedLost != 0 {
			t.Fatalf("%v side: %d link downs, %d posted lost", b.cfg.Role, c.LinkDowns, c.PostedLost)
		}
	}
}

// Rekey on demand (`ctl rekey`), from either side, many times under lossy
// traffic: nothing lost, duplicated or reordered, and the epochs move.
func TestRekeyOnDemandLossless(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		// A short grace: each side may move again once the peer has
		// opened 32 frames of its new epoch.
		cfg := Config{RekeyGrace: 32}
		p := newKeyedPair(t, mode, cfg, cfg)
		p.up()
		calls := 0
		trafficUnderKeyChanges(t, p, 300, func(r int) {
			if r%10 == 0 {
				b := p.h
				if r%20 == 0 {
					b = p.g
				}
				if err := b.Rekey(); err != nil {
					t.Fatal(err)
				}
				calls++
			}
		})
		hs, _ := p.h.KeyState()
		gs, _ := p.g.KeyState()
		hc, gc := p.h.Counters(), p.g.Counters()
		// Each side's rekeys move only its own sender; 15 calls each.
		if hc.TxRekeys < 10 || gc.TxRekeys < 10 || hs.TxEpoch != uint32(hc.TxRekeys) || gs.RxEpoch != hs.TxEpoch {
			t.Fatalf("%v: %d calls: host moved %d times (epoch %d), GPU %d times; GPU receives epoch %d",
				mode, calls, hc.TxRekeys, hs.TxEpoch, gc.TxRekeys, gs.RxEpoch)
		}
	}
}

// RekeyAfter moves the senders to new epochs on their own, under load.
func TestRekeyAfterLossless(t *testing.T) {
	t.Parallel()
	cfg := Config{RekeyAfter: 16}
	p := newKeyedPair(t, seal.ModeGCM, cfg, cfg)
	p.up()
	trafficUnderKeyChanges(t, p, 300, func(int) {})
	hc, gc := p.h.Counters(), p.g.Counters()
	if hc.TxRekeys < 10 || gc.TxRekeys < 10 || gc.RxKeyRotations != hc.TxRekeys {
		t.Fatalf("host moved %d times (%d frames sealed), GPU %d; GPU rotated its receive key %d times",
			hc.TxRekeys, hc.FramesSealed, gc.TxRekeys, gc.RxKeyRotations)
	}
}

// The manager's key change: a new generation installed on both sides,
// activated on one, is taken up by both without loss; the old key then
// opens nothing.
func TestKeyChangeLossless(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		// The second change follows the first after 60 rounds: a short
		// grace lets the senders move again that soon.
		cfg := Config{RekeyGrace: 32}
		p := newKeyedPair(t, mode, cfg, cfg)
		wire := p.capture(p.h, nil)
		p.up()
		p.send(p.h, mwr(0x1000, 16))
		p.run()
		oldFrames := len(*wire)
		p.gq = nil
		trafficUnderKeyChanges(t, p, 200, func(r int) {
			switch r {
			case 50:
				for _, b := range []*Bridge{p.h, p.g} {
					if err := b.InstallKey(1, pairKey(2)); err != nil {
						t.Fatal(err)
					}
				}
			case 60:
				if err := p.h.ActivateKey(); err != nil {
					t.Fatal(err)
				}
			case 120:
				for _, b := range []*Bridge{p.g, p.h} {
					if err := b.InstallKey(2, pairKey(3)); err != nil {
						t.Fatal(err)
					}
				}
				_ = p.g.ActivateKey()
			}
		})
		for _, b := range []*Bridge{p.h, p.g} {
			s, _ := b.KeyState()
			if s.TxGeneration != 2 || s.RxGeneration != 2 || s.ActiveGeneration != 2 {
				t.Fatalf("%v: %v side seals under generation %d, opens %d, active %d; want 2", mode, b.cfg.Role, s.TxGeneration, s.RxGeneration, s.ActiveGeneration)
			}
		}
		before := p.g.Counters()
		for _, f := range (*wire)[:oldFrames] {
			if encap.Header(f).Type() == encap.MsgTLP {
				freshed := append([]byte(nil), f...)
				freshPN(freshed, 0)
				refuse(t, p.g, p.now, freshed, nil, mode.String()+" generation-0 frame after the change")
			}
		}
		if c := p.g.Counters(); c.TLPsReceived != before.TLPsReceived {
			t.Fatalf("%v: a generation-0 frame delivered after the change", mode)
		}
	}
}

// TestIdleRekeyWithinGraceTime: on a pair that carries only keepalives
// (one a millisecond, far fewer than RekeyGrace frames), a rekey followed
// by a manager key change completes RekeyGraceTime after the peer's first
// frame under the new epoch: the GPU side retires the host's old epoch at
// exactly that time (its Deadline wakes it), its echo lets the host move
// again, and both end on the new generation. Without the time bound that
// took 4096 keepalives. Time moves from deadline to deadline.
func TestIdleRekeyWithinGraceTime(t *testing.T) {
	t.Parallel()
	// 30.05 ms: no keepalive falls due at the moment of retirement.
	for _, grace := range []time.Duration{0, 30*time.Millisecond + 50*time.Microsecond} {
		want := grace
		if want == 0 {
			want = seal.DefaultPreviousGraceTime
		}
		t.Run(want.String(), func(t *testing.T) {
			t.Parallel()
			cfg := Config{RekeyGraceTime: grace}
			p := newKeyedPair(t, seal.ModeGCM, cfg, cfg)
			p.up()
			start := p.now
			if err := p.h.Rekey(); err != nil {
				t.Fatal(err)
			}
			for _, b := range []*Bridge{p.h, p.g} {
				if err := b.InstallKey(1, pairKey(2)); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.g.ActivateKey(); err != nil {
				t.Fatal(err)
			}
			const keepalive = time.Millisecond
			var switched, retired time.Duration = -1, -1
			for {
				hs, _ := p.h.KeyState()
				gs, _ := p.g.KeyState()
				if switched < 0 && gs.RxEpoch == 1 {
					switched = p.now // the host's first frame of epoch 1 arrived
				}
				if switched >= 0 && retired < 0 && !gs.RxPrevious {
					retired = p.now
				}
				if hs.TxGeneration == 1 && gs.TxGeneration == 1 && hs.RxGeneration == 1 && gs.RxGeneration == 1 {
					break
				}
				if p.now-start > want+3*keepalive {
					t.Fatalf("key change unfinished %v after the rekey: host %+v, GPU %+v", p.now-start, hs, gs)
				}
				p.now = max(p.now, min(p.h.Deadline(), p.g.Deadline()))
				p.h.HandleTimeout(p.now)
				p.g.HandleTimeout(p.now)
				p.run()
			}
			if switched < 0 || switched-start > keepalive || retired != switched+want {
				t.Fatalf("rekey at %v, the GPU side switched at %v and retired the old epoch at %v; want within a keepalive, then %v later",
					start, switched, retired, want)
			}
			if c := p.g.Counters(); c.FramesOpened >= 4096 || c.LinkDowns != 0 {
				t.Fatalf("GPU side opened %d frames (the frame grace is 4096), %d link downs", c.FramesOpened, c.LinkDowns)
			}
		})
	}
}
