package bridge

import (
	"testing"
	"time"

	"github.com/dxpu/dxpu/tlp"
)

// testPair joins two bridges back to back with manual time: frames go
// straight across unless drop says otherwise.
type testPair struct {
	t      testing.TB
	h, g   *Bridge
	now    time.Duration
	buf    []byte
	drop   func(from *Bridge, frame []byte) bool
	hq, gq []delivered // TLPs delivered to each side (copied)
	hev    []Event
	gev    []Event
	accept [2]ClassMask
}

type delivered struct {
	b []byte
}

func (d delivered) v() tlp.View { return tlp.View(d.b) }

func newTestPair(t testing.TB, hc, gc Config) *testPair {
	t.Helper()
	hc.Role, gc.Role = RoleHost, RoleGPU
	hc.PairID, gc.PairID = 0x123456, 0x123456
	if hc.Seed == 0 {
		hc.Seed = 1
	}
	if gc.Seed == 0 {
		gc.Seed = 2
	}
	h, err := New(hc)
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(gc)
	if err != nil {
		t.Fatal(err)
	}
	return &testPair{t: t, h: h, g: g, buf: make([]byte, 65535), accept: [2]ClassMask{AcceptAll, AcceptAll}}
}

func (p *testPair) other(b *Bridge) *Bridge {
	if b == p.h {
		return p.g
	}
	return p.h
}

// run exchanges frames until both sides are quiet, delivering TLPs and
// collecting events.
func (p *testPair) run() {
	for i := 0; i < 10000; i++ {
		moved := false
		for _, b := range []*Bridge{p.h, p.g} {
			for {
				n := b.NextFrame(p.now, p.buf)
				if n == 0 {
					break
				}
				moved = true
				if p.drop != nil && p.drop(b, p.buf[:n]) {
					continue
				}
				_ = p.other(b).HandleFrame(p.now, p.buf[:n])
			}
		}
		moved = p.collect() || moved
		if !moved {
			return
		}
	}
	p.t.Fatal("testPair.run: no quiescence after 10000 rounds")
}

func (p *testPair) collect() bool {
	moved := false
	for i, b := range []*Bridge{p.h, p.g} {
		for {
			v, ok := b.NextTLP(p.accept[i])
			if !ok {
				break
			}
			moved = true
			d := delivered{append([]byte(nil), v...)}
			if b == p.h {
				p.hq = append(p.hq, d)
			} else {
				p.gq = append(p.gq, d)
			}
			if !b.cfg.AutoRelease {
				if err := b.Release(v.Class(), 1, v.DataCredits()); err != nil {
					p.t.Fatal(err)
				}
			}
		}
		for {
			e, ok := b.NextEvent()
			if !ok {
				break
			}
			if b == p.h {
				p.hev = append(p.hev, e)
			} else {
				p.gev = append(p.gev, e)
			}
		}
	}
	return moved
}

// advance moves time forward in steps of at most step, running timers.
func (p *testPair) advance(d, step time.Duration) {
	end := p.now + d
	for p.now < end {
		p.now = min(end, p.now+step)
		p.h.HandleTimeout(p.now)
		p.g.HandleTimeout(p.now)
		p.run()
	}
}

func (p *testPair) up() {
	p.t.Helper()
	p.run()
	p.advance(2*time.Millisecond, 100*time.Microsecond)
	if p.h.State() != StateUp || p.g.State() != StateUp {
		p.t.Fatalf("not up: host %v gpu %v", p.h.State(), p.g.State())
	}
}

func (p *testPair) send(b *Bridge, pk tlp.Packet) {
	p.t.Helper()
	raw, err := pk.AppendTo(nil)
	if err != nil {
		p.t.Fatal(err)
	}
	if err := b.HandleTLP(p.now, raw); err != nil {
		p.t.Fatalf("HandleTLP %v: %v", pk.Kind, err)
	}
}

var (
	hostRC = tlp.NewID(0, 0, 0)
	gpuFn  = tlp.NewID(3, 0, 0)
)

func mwr(addr uint64, n int) tlp.Packet {
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(addr>>8) + byte(i)
	}
	return tlp.Packet{Kind: tlp.MWr, Addr64: true, RequesterID: hostRC, FirstBE: 0xf, LastBE: 0xf, Address: addr, Data: data}
}

func mrd(req tlp.ID, tag uint16, addr uint64, n int) tlp.Packet {
	p := tlp.Packet{Kind: tlp.MRd, Addr64: true, RequesterID: req, Tag: tag, FirstBE: 0xf, Address: addr, Length: uint16(n / 4)}
	if n > 4 {
		p.LastBE = 0xf
	}
	return p
}

func cpld(completer, req tlp.ID, tag uint16, bc int, la uint8, data []byte) tlp.Packet {
	return tlp.Packet{Kind: tlp.CplD, CompleterID: completer, RequesterID: req, Tag: tag, ByteCount: uint16(bc), LowerAddress: la, Data: data}
}
