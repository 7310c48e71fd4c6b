package bridge

import (
	"errors"
	"testing"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/tlp/encap"
)

// dropReasons are the counters of frames refused before they took effect,
// by reason: the header's own and the seal's.
type dropReasons struct {
	Dropped, Malformed, Version, UnknownPair          uint64
	SealMalformed, Unsealed, Forged, Replayed, NoSess uint64
}

func reasonsOf(c Counters) dropReasons {
	return dropReasons{c.FramesDropped, c.DroppedMalformed, c.DroppedVersion, c.DroppedUnknownPair,
		c.DroppedSealMalformed, c.DroppedUnsealed, c.DroppedForged, c.DroppedReplayed, c.DroppedNoSession}
}

func (a dropReasons) minus(b dropReasons) dropReasons {
	return dropReasons{a.Dropped - b.Dropped, a.Malformed - b.Malformed, a.Version - b.Version, a.UnknownPair - b.UnknownPair,
		a.SealMalformed - b.SealMalformed, a.Unsealed - b.Unsealed, a.Forged - b.Forged, a.Replayed - b.Replayed, a.NoSess - b.NoSess}
}

// Frames refused for their clear header are counted under their own
// reason, keyed pair or not: a truncated header as DroppedMalformed, a
// version other than 1 as DroppedVersion, another pair's frame (sealed
// under that pair's key or not sealed at all) as DroppedUnknownPair;
// never as the seal's malformed, unsealed or forged, which stay for frames
// of this pair that the seal refused. None of these refusals allocates.
func TestHeaderDropReasons(t *testing.T) {
	for _, keyedPair := range []bool{false, true} {
		name := "unkeyed"
		p := newTestPair(t, Config{}, Config{})
		if keyedPair {
			name = "keyed"
			p = newKeyedPair(t, seal.ModeGCM, Config{}, Config{})
		}
		wire := p.capture(p.h, nil)
		p.up()
		p.send(p.h, mwr(0x1000, 64))
		p.run()
		genuine := append([]byte(nil), (*wire)[len(*wire)-1]...)

		// Another pair's frames: unsealed, and sealed under its own key.
		otherPlain := plainFrame(encap.MsgTLP, 0x654321, 0, 1, tlpBody(enc(mwr(0x2000, 16))))
		other, err := seal.New(seal.Config{PairID: 0x654321, Role: RoleHost, Mode: seal.ModeGCM}, 0, pairKey(1))
		if err != nil {
			t.Fatal(err)
		}
		otherSealed, err := other.SealHandshake(nil, plainFrame(encap.MsgControl, 0x654321, 0, 0,
			(&encap.Control{Type: encap.CtlReset, Role: RoleHost, Session: 1}).AppendTo(nil)), 1<<40)
		if err != nil {
			t.Fatal(err)
		}
		badVersion := append([]byte(nil), genuine...)
		badVersion[0] = 2<<4 | badVersion[0]&0xf

		cases := []struct {
			what  string
			frame []byte
			want  error
			moved dropReasons
		}{
			{"truncated header", genuine[:encap.HeaderLen-1], seal.ErrShort, dropReasons{Dropped: 1, Malformed: 1}},
			{"empty frame", nil, seal.ErrShort, dropReasons{Dropped: 1, Malformed: 1}},
			{"version 2", badVersion, seal.ErrVersion, dropReasons{Dropped: 1, Version: 1}},
			{"version 0", func() []byte { f := append([]byte(nil), genuine...); f[0] &= 0xf; return f }(), seal.ErrVersion, dropReasons{Dropped: 1, Version: 1}},
			{"another pair's unsealed frame", otherPlain, nil, dropReasons{Dropped: 1, UnknownPair: 1}},
			{"another pair's sealed frame", otherSealed, nil, dropReasons{Dropped: 1, UnknownPair: 1}},
		}
		for _, c := range cases {
			before := reasonsOf(p.g.Counters())
			err := p.g.HandleFrame(p.now, append([]byte(nil), c.frame...))
			if !errors.Is(err, ErrFrame) || (c.want != nil && !errors.Is(err, c.want)) {
				t.Errorf("%s %s: HandleFrame returned %v, want ErrFrame and %v", name, c.what, err, c.want)
			}
			if got := reasonsOf(p.g.Counters()).minus(before); got != c.moved {
				t.Errorf("%s %s: counters moved %+v, want %+v", name, c.what, got, c.moved)
			}
			buf := make([]byte, len(c.frame))
			if allocs := testing.AllocsPerRun(50, func() {
				copy(buf, c.frame)
				if err := p.g.HandleFrame(p.now, buf); err == nil {
					t.Fatalf("%s %s accepted", name, c.what)
				}
			}); allocs != 0 {
				t.Errorf("%s %s: %.1f allocations per refusal", name, c.what, allocs)
			}
		}
		p.staysUp(t, name+" after the header refusals")
		if !keyedPair {
			continue
		}
		// This pair's frames with a malformed seal layer stay the seal's.
		shortBody := append([]byte(nil), genuine...)
		encap.Header(shortBody).SetBodyLen(seal.Overhead - 1)
		long := append([]byte(nil), genuine...)
		encap.Header(long).SetBodyLen(len(genuine) - encap.HeaderLen + 1)
		for _, c := range []struct {
			what  string
			frame []byte
		}{{"sealed body shorter than the seal's overhead", shortBody}, {"body length beyond the frame", long}} {
			before := reasonsOf(p.g.Counters())
			refuse(t, p.g, p.now, c.frame, nil, "keyed "+c.what)
			if got, want := reasonsOf(p.g.Counters()).minus(before), (dropReasons{Dropped: 1, SealMalformed: 1}); got != want {
				t.Errorf("keyed %s: counters moved %+v, want %+v", c.what, got, want)
			}
		}
		// And this pair's unsealed frames are still DroppedUnsealed.
		before := reasonsOf(p.g.Counters())
		refuse(t, p.g, p.now, plainFrame(encap.MsgTLP, 0x123456, 0, 1, tlpBody(enc(mwr(0x2000, 16)))), seal.ErrNotSealed, "keyed unsealed frame of this pair")
		if got, want := reasonsOf(p.g.Counters()).minus(before), (dropReasons{Dropped: 1, Unsealed: 1}); got != want {
			t.Errorf("keyed unsealed frame of this pair: counters moved %+v, want %+v", got, want)
		}
		p.staysUp(t, name+" after the refusals")
	}
}

// The header refusals match ErrFrame whatever else they wrap.
func TestHeaderDropErrors(t *testing.T) {
	t.Parallel()
	for _, err := range []error{errShortHeader, errVersion, errUnknownPair} {
		if !errors.Is(err, ErrFrame) || err.Error() == "" {
			t.Errorf("%v does not match ErrFrame", err)
		}
	}
}
