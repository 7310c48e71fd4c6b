package seal_test

import (
	"fmt"
	"testing"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/tlp/encap"
)

var benchSizes = []int{64, 256, 1500, 9000}

// BenchmarkSealOpen seals a frame on one side and opens it on the other,
// per body size and mode, next to a plain copy of the same frame (what a
// bridge does with a frame anyway) as the baseline.
func BenchmarkSealOpen(b *testing.B) {
	for _, size := range benchSizes {
		plain := plainFrame(encap.MsgTLP, 1, make([]byte, size))
		b.Run(fmt.Sprintf("memcpy/%d", size), func(b *testing.B) {
			dst := make([]byte, len(plain))
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				copy(dst, plain)
			}
			gbits(b, size)
		})
		for _, m := range []seal.Mode{seal.ModeGCM, seal.ModeGMAC} {
			b.Run(fmt.Sprintf("%v/%d", m, size), func(b *testing.B) {
				// Steady state: no epoch change inside the measurement.
				host, gpu := pair(b, m, func(c *seal.Config) { c.RekeyAfter = 1 << 40 })
				buf := make([]byte, 0, len(plain)+seal.Overhead)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					sealed, err := host.Seal(buf[:0], plain)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := gpu.Open(sealed); err != nil {
						b.Fatal(err)
					}
				}
				gbits(b, size)
			})
		}
	}
}

// BenchmarkOpenForged is the cost of refusing a forged frame (wrong tag):
// what a flood of forgeries costs the receiver, and that it allocates
// nothing.
func BenchmarkOpenForged(b *testing.B) {
	for _, m := range []seal.Mode{seal.ModeGCM, seal.ModeGMAC} {
		b.Run(fmt.Sprintf("%v/1500", m), func(b *testing.B) {
			host, gpu := pair(b, m, nil)
			sealed, err := host.Seal(nil, plainFrame(encap.MsgTLP, 1, make([]byte, 1500)))
			if err != nil {
				b.Fatal(err)
			}
			sealed[len(sealed)-1] ^= 1
			frame := make([]byte, len(sealed))
			b.ReportAllocs()
			for b.Loop() {
				copy(frame, sealed)
				if _, err := gpu.Open(frame); err == nil {
					b.Fatal("forged frame opened")
				}
			}
		})
	}
}

func gbits(b *testing.B, size int) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(size)*8*float64(b.N)/s/1e9, "Gbit/s")
	}
}
