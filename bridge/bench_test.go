package bridge

import (
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/tlp"
)

// benchPair moves TLPs host -> GPU through both bridges, acks back, with no
// allocation per TLP in steady state.
func benchDataPath(b *testing.B, raw []byte, batch int) {
	benchDataPathMode(b, raw, batch, 0)
}

// benchDataPathMode is benchDataPath over a pair keyed in mode (0:
// unkeyed). Both sides seal and open: the figure is the whole pair's CPU
// per TLP.
func benchDataPathMode(b *testing.B, raw []byte, batch int, mode seal.Mode) {
	hc, gc := Config{MTU: 9000, Window: 1024}, Config{AutoRelease: true, MTU: 9000, Window: 1024}
	if mode != 0 {
		hc, gc = keyed(hc, mode), keyed(gc, mode)
	}
	p := newTestPair(b, hc, gc)
	p.up()
	buf := make([]byte, 9000)
	step := func() {
		p.now += 100 * time.Nanosecond
		for _, pair := range [2][2]*Bridge{{p.h, p.g}, {p.g, p.h}} {
			for {
				n := pair[0].NextFrame(p.now, buf)
				if n == 0 {
					break
				}
				if err := pair[1].HandleFrame(p.now, buf[:n]); err != nil {
					b.Fatal(err)
				}
			}
		}
		for {
			if _, ok := p.g.NextTLP(AcceptAll); !ok {
				break
			}
		}
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for {
			err := p.h.HandleTLP(p.now, raw)
			if err == nil {
				break
			}
			if err != ErrBusy {
				b.Fatal(err)
			}
			step()
		}
		if i%batch == batch-1 {
			step()
		}
	}
	b.StopTimer()
	if c := p.g.Counters(); c.TLPsDelivered < uint64(b.N)/2 {
		b.Fatalf("delivered %d of %d", c.TLPsDelivered, b.N)
	}
}

// BenchmarkDataPathKeyed runs the posted-write data path unkeyed, then
// keyed in both modes, in the same run: ns/TLP for each (MB/s is payload
// goodput on one core for both bridges together), and for the keyed ones
// keyed_ratio, keyed goodput over the plaintext goodput measured just
// before.
func BenchmarkDataPathKeyed(b *testing.B) {
	cases := []struct {
		name  string
		size  int
		batch int
	}{{"MWr256", 256, 8}, {"MWr64Batch32", 64, 32}, {"MWr512", 512, 16}}
	for _, c := range cases {
		var plain float64 // ns/TLP of the latest plaintext run
		for _, mode := range []seal.Mode{0, seal.ModeGCM, seal.ModeGMAC} {
			name := "plaintext"
			if mode != 0 {
				name = mode.String()
			}
			b.Run(c.name+"/"+name, func(b *testing.B) {
				benchDataPathMode(b, enc(mwr(0x1000, c.size)), c.batch, mode)
				ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				b.ReportMetric(ns, "ns/TLP")
				if mode == 0 {
					plain = ns
				} else if plain > 0 {
					b.ReportMetric(plain/ns, "keyed_ratio")
				}
			})
		}
	}
}

func BenchmarkDataPathMWr256(b *testing.B) {
	benchDataPath(b, enc(mwr(0x1000, 256)), 8)
}

func BenchmarkDataPathMWr64Batch32(b *testing.B) {
	benchDataPath(b, enc(mwr(0x1000, 64)), 32)
}

func BenchmarkDataPathMRd(b *testing.B) {
	// Reads need completions back; measure the request direction with the
	// GPU answering each read at once.
	p := newTestPair(b, Config{MTU: 9000}, Config{AutoRelease: true, MTU: 9000})
	p.up()
	buf := make([]byte, 9000)
	raw := enc(mrd(hostRC, 1, 0x1000, 64))
	cpl := enc(cpld(gpuFn, hostRC, 0, 64, 0, make([]byte, 64)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p.now += 100 * time.Nanosecond
		if err := p.h.HandleTLP(p.now, raw); err != nil {
			b.Fatal(err)
		}
		for round := 0; round < 2; round++ {
			for _, pair := range [2][2]*Bridge{{p.h, p.g}, {p.g, p.h}} {
				for {
					n := pair[0].NextFrame(p.now, buf)
					if n == 0 {
						break
					}
					_ = pair[1].HandleFrame(p.now, buf[:n])
				}
			}
			for {
				v, ok := p.g.NextTLP(AcceptAll)
				if !ok {
					break
				}
				tlp.View(cpl).SetTag(v.Tag())
				tlp.View(cpl).SetRequesterID(v.RequesterID())
				if err := p.g.HandleTLP(p.now, cpl); err != nil {
					b.Fatal(err)
				}
			}
			for {
				v, ok := p.h.NextTLP(AcceptAll)
				if !ok {
					break
				}
				_ = p.h.Release(v.Class(), 1, v.DataCredits())
			}
		}
	}
	b.StopTimer()
	if p.h.Outstanding() != 0 {
		b.Fatalf("%d outstanding", p.h.Outstanding())
	}
}
