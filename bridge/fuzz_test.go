package bridge

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge/seal"
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

// keyedFuzzPair is a keyed pair that is up, whose host side has sent
// writes and a read the GPU side took: every frame the host sealed so far
// has been delivered (or, below, held back).
func keyedFuzzPair(t testing.TB, mode seal.Mode) (*testPair, [][]byte) {
	p := newKeyedPair(t, mode, Config{}, Config{})
	wire := p.capture(p.h, nil)
	p.up()
	p.send(p.h, mwr(0x1000, 64))
	p.send(p.h, mrd(hostRC, 3, 0x2000, 16))
	p.run()
	p.drop = nil
	return p, *wire
}

// FuzzHandleFrameKeyedForged: an attacker's frame, any bytes at all (the
// seeds are genuine frames already delivered, so replays), reaches the
// GPU side of a keyed pair. It is refused (ErrFrame and a seal sentinel,
// or for a short header, another version or another pair's ID the header
// refusal before the seal), counted, and changes nothing: no TLP delivered, the link stays up, the
// next genuine write still arrives.
func FuzzHandleFrameKeyedForged(f *testing.F) {
	for _, mode := range modes {
		_, wire := keyedFuzzPair(f, mode)
		for _, w := range wire {
			f.Add(uint8(mode), w)
		}
	}
	f.Add(uint8(seal.ModeGCM), make([]byte, encap.HeaderLen+seal.Overhead))
	f.Fuzz(func(t *testing.T, m uint8, frame []byte) {
		mode := modes[int(m)%len(modes)]
		p, _ := keyedFuzzPair(t, mode)
		before := p.g.Counters()
		queued := p.g.Queued()
		err := p.g.HandleFrame(p.now, frame)
		if err == nil || !errors.Is(err, ErrFrame) {
			t.Fatalf("attacker frame accepted: %v", err)
		}
		var fe *seal.FrameError
		var hd *headerDrop
		if !errors.As(err, &fe) && !errors.As(err, &hd) {
			t.Fatalf("refusal %v is neither the seal's nor the clear header's", err)
		}
		c := p.g.Counters()
		if c.FramesDropped != before.FramesDropped+1 || c.FramesReceived != before.FramesReceived || p.g.Queued() != queued || p.g.State() != StateUp {
			t.Fatalf("attacker frame had an effect: dropped %d->%d received %d->%d queued %d->%d state %v",
				before.FramesDropped, c.FramesDropped, before.FramesReceived, c.FramesReceived, queued, p.g.Queued(), p.g.State())
		}
		p.send(p.h, mwr(0x3000, 16))
		p.run()
		if n := len(p.gq); n != 3 || p.gq[2].v().Address() != 0x3000 {
			t.Fatalf("after the attacker frame: %d TLPs delivered, want the two before and the next write", n)
		}
	})
}

// FuzzHandleFrameKeyedInner: a genuine peer (holding the key) seals any
// plain frame, so the fuzzer reaches the parsers behind the seal. No
// panic, every rejection wraps ErrFrame, the bookkeeping stays consistent,
// and the read still gets exactly one final answer.
func FuzzHandleFrameKeyedInner(f *testing.F) {
	_, wire := keyedFuzzPair(f, seal.ModeGMAC)
	for _, w := range wire {
		// GMAC leaves the body in clear: the plain frame is the header
		// (SEALED cleared, body length restored) and the body.
		plain := append([]byte(nil), w[:encap.HeaderLen]...)
		plain[0] &^= seal.FlagSealed
		plain = append(plain, w[encap.HeaderLen+seal.SecHeaderLen:len(w)-seal.TagLen]...)
		f.Add(plain)
	}
	f.Fuzz(func(t *testing.T, plain []byte) {
		if len(plain) < encap.HeaderLen || len(plain)-encap.HeaderLen > seal.MaxBody {
			return
		}
		plain = append([]byte(nil), plain...)
		plain[0] = encap.Version<<4 | plain[0]&0x07 // version 1, SEALED clear: what Seal takes
		binary.BigEndian.PutUint16(plain[6:], uint16(len(plain)-encap.HeaderLen))
		p, _ := keyedFuzzPair(t, seal.ModeGCM)
		var sealed []byte
		var err error
		if isHandshake(plain) {
			sealed, err = p.h.keys.ch.SealHandshake(nil, plain, uint64(p.now)+1)
		} else {
			sealed, err = p.h.keys.ch.Seal(nil, plain)
		}
		if err != nil {
			t.Fatalf("sealing a well-formed plain frame: %v", err)
		}
		if err := p.g.HandleFrame(p.now, sealed); err != nil && !errors.Is(err, ErrFrame) {
			t.Fatalf("error %v does not wrap ErrFrame", err)
		}
		if err := p.g.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
		p.advance(60*time.Millisecond, time.Millisecond)
		for _, b := range []*Bridge{p.h, p.g} {
			if err := b.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
		}
		cpls := 0
		for _, d := range p.hq {
			if d.v().Kind().IsCompletion() {
				cpls++
			}
		}
		if p.h.Outstanding() != 0 || cpls != 1 {
			t.Fatalf("%d outstanding, %d completions for one read", p.h.Outstanding(), cpls)
		}
	})
}
