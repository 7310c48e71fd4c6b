package main

import (
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/tlp"
)

// FuzzABI drives an up pair of bridges through the ABI's calls with
// arbitrary buffers and arguments, as a C caller (or whatever feeds it
// frames from the fabric and TLPs from its PCIe side) could: frames and
// TLPs of any bytes, output buffers of any size, accept masks, credit
// releases, time steps. Invariants: every call returns a code of the
// header, never DXPU_E_INTERNAL (a contained panic is still a bug); a
// call that fails leaves its failure for dxpu_bridge_last_error as one
// non-empty line; a length returned fits the buffer (DXPU_MORE) or says
// what it needs (DXPU_E_SHORT).
func FuzzABI(f *testing.F) {
	w := mwr(0x2000, 64)
	rd, _ := (&tlp.Packet{Kind: tlp.MRd, RequesterID: tlp.NewID(1, 0, 0), Tag: 4, Address: 0x4000, Length: 16, FirstBE: 0xf, LastBE: 0xf}).Encode()
	script := func(ops ...[]byte) []byte {
		var b []byte
		for _, o := range ops {
			b = append(b, o...)
		}
		return b
	}
	withLen := func(op byte, p []byte) []byte { return append([]byte{op, byte(len(p))}, p...) }
	f.Add(script(withLen(1, w), []byte{6}, []byte{3, 7, 200}, []byte{4, 0, 1, 4}))
	f.Add(script(withLen(1, rd), []byte{6}, []byte{3, 7, 10}, []byte{3, 7, 200}, []byte{2, 5}, []byte{5, 200}))
	f.Add(script(withLen(0, []byte{0x17, 1, 2, 3}), withLen(7, w), []byte{8}))
	f.Add(script(withLen(1, w), []byte{2, 0}, []byte{2, 255}, []byte{6}, []byte{3, 8, 100}, []byte{4, 3, 1, 1}))
	f.Fuzz(func(t *testing.T, s []byte) {
		host, gpu, now := upPair(t, false)
		buf := make([]byte, 4096)
		check := func(what string, id int64, code int) {
			if code == codeInternal || codeName(code) == "unknown dxpu error code" {
				_, msg := opLastError(id)
				t.Fatalf("%s: %s (%d): %s", what, codeName(code), code, msg)
			}
			if code < 0 {
				lc, msg := opLastError(id)
				if lc != code || msg == "" || strings.ContainsAny(msg, "\r\n") {
					t.Fatalf("%s failed with %s, last error %s %q", what, codeName(code), codeName(lc), msg)
				}
			}
		}
		next := func() (byte, bool) {
			if len(s) == 0 {
				return 0, false
			}
			b := s[0]
			s = s[1:]
			return b, true
		}
		bytesArg := func() []byte {
			n, _ := next()
			n = min(n, byte(len(s)))
			b := s[:n]
			s = s[n:]
			return b
		}
		for steps := 0; len(s) > 0 && steps < 64; steps++ {
			op, _ := next()
			side, other := gpu, host
			if op&0x80 != 0 {
				side, other = host, gpu
			}
			now += time.Microsecond
			switch op & 0x7f % 9 {
			case 0:
				check("handle frame", side, opHandleFrame(side, now, bytesArg()))
			case 1:
				check("send TLP", side, opSendTLP(side, now, bytesArg()))
			case 2:
				size, _ := next()
				n, code := opNextFrame(side, now, buf[:int(size)*8])
				check("next frame", side, code)
				if code == codeMore && n > int(size)*8 || code == codeShort && n <= int(size)*8 {
					t.Fatalf("next frame: %s, %d bytes for a buffer of %d", codeName(code), n, int(size)*8)
				}
			case 3:
				mask, _ := next()
				size, _ := next()
				n, code := opNextTLP(side, uint32(mask), buf[:size])
				check("next TLP", side, code)
				if code == codeMore && n > int(size) || code == codeShort && n <= int(size) {
					t.Fatalf("next TLP: %s, %d bytes for a buffer of %d", codeName(code), n, size)
				}
				if code == codeMore {
					if _, err := tlp.Parse(buf[:n]); err != nil {
						t.Fatalf("delivered TLP does not parse: %v", err)
					}
				}
			case 4:
				cls, _ := next()
				h, _ := next()
				d, _ := next()
				check("release", side, opRelease(side, uint32(cls), uint32(h), uint32(d)))
			case 5:
				d, _ := next()
				now += time.Duration(d) * 10 * time.Microsecond
				check("timer", side, opOnTimer(side, now))
			case 6:
				for moved, rounds := true, 0; moved && rounds < 16; rounds++ {
					moved = false
					for _, d := range [][2]int64{{side, other}, {other, side}} {
						for i := 0; i < 64; i++ {
							n, code := opNextFrame(d[0], now, buf)
							check("next frame", d[0], code)
							if code != codeMore {
								break
							}
							check("handle frame", d[1], opHandleFrame(d[1], now, buf[:n]))
							moved = true
						}
					}
				}
			case 7:
				b := bytesArg()
				cls, hd, dc, code, err := tlpCredits(b)
				if _, perr := tlp.Parse(b); (perr == nil) != (code == codeOK) || code == codeOK && (cls > tlp.Completion || hd < 0 || dc < 0) || code != codeOK && err == nil {
					t.Fatalf("credits of % x: %v %d %d %s %v (parse %v)", b, cls, hd, dc, codeName(code), err, perr)
				}
			case 8:
				check("next event", side, opNextEvent(side, func(*bridge.Event, uint32) {}))
			}
		}
	})
}
