package bridge

import (
	"errors"
	"testing"
	"time"

	"github.com/dxpu/dxpu/tlp/encap"
)

// FuzzHandleFrame feeds arbitrary frames to a bridge that is up and has
// traffic in flight: no panic, every rejection wraps ErrFrame, and the
// bookkeeping stays consistent.
func FuzzHandleFrame(f *testing.F) {
	p := newTestPair(f, Config{}, Config{})
	p.up()
	var seeds [][]byte
	p.drop = func(from *Bridge, fr []byte) bool {
		seeds = append(seeds, append([]byte(nil), fr...))
		return false
	}
	p.send(p.h, mwr(0x1000, 64))
	p.send(p.h, mrd(hostRC, 3, 0x2000, 16))
	p.advance(100*time.Microsecond, 10*time.Microsecond)
	for _, s := range seeds {
		f.Add(s)
	}
	f.Add(make([]byte, encap.HeaderLen))
	f.Fuzz(func(t *testing.T, frame []byte) {
		p := newTestPair(t, Config{}, Config{})
		p.up()
		p.send(p.h, mwr(0x1000, 64))
		p.send(p.h, mrd(hostRC, 3, 0x2000, 16))
		for _, b := range []*Bridge{p.h, p.g} {
			err := b.HandleFrame(p.now, frame)
			if err != nil && !errors.Is(err, ErrFrame) {
				t.Fatalf("error %v does not wrap ErrFrame", err)
			}
			if err := b.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
		}
		p.advance(60*time.Millisecond, time.Millisecond)
		for _, b := range []*Bridge{p.h, p.g} {
			if err := b.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
		}
		// The read got exactly one final answer, real or synthesized.
		cpls := 0
		for _, d := range p.hq {
			if d.v().Kind().IsCompletion() {
				cpls++
			}
		}
		if p.h.Outstanding() != 0 || cpls > 1 {
			t.Fatalf("%d outstanding, %d completions for one read", p.h.Outstanding(), cpls)
		}
	})
}
