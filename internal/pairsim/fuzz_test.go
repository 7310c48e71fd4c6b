package pairsim

import (
	"encoding/binary"
	"github.com/dxpu/dxpu/bridge/vpair"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/memlink"
	"github.com/dxpu/dxpu/tlp/encap"
)

// fuzzFrames splits fuzz input into frames: each is a control byte (bit 0:
// which side receives it; bit 1: stamp a valid version and pair ID so the
// fuzzer reaches the body; bits 2-7: microseconds after the previous one),
// a length byte, then that many bytes.
func fuzzFrames(data []byte) (frames [][]byte, ctl []byte) {
	for len(data) >= 2 {
		c, n := data[0], int(data[1])
		data = data[2:]
		n = min(n, len(data))
		frames = append(frames, data[:n])
		ctl = append(ctl, c)
		data = data[n:]
	}
	return frames, ctl
}

// FuzzPairFrames feeds random frame sequences into both bridges of a pair
// while stub endpoints exchange traffic. Whatever arrives, nothing panics,
// the bridges' bookkeeping stays consistent, every request still gets
// exactly one final completion (real or synthesized), and the run ends.
// (Forged TLPs can displace genuine posted writes: dxpu frames carry no
// authentication, so write delivery is not asserted here.)
func FuzzPairFrames(f *testing.F) {
	hello := (&encap.Control{Type: encap.CtlHello, Role: encap.RoleGPU, TagBits: 8, Session: 5, Window: 8, MaxTLP: 100}).AppendTo(nil)
	reset := (&encap.Control{Type: encap.CtlReset, Role: encap.RoleGPU, Session: 5}).AppendTo(nil)
	mk := func(t encap.MsgType, body []byte, ctl byte) []byte {
		h := make([]byte, encap.HeaderLen)
		encap.Header(h).SetType(t)
		encap.Header(h).SetBodyLen(len(body))
		encap.Header(h).SetVersionFlags(encap.Version, encap.FlagAck|encap.FlagSack)
		fr := append(h, body...)
		return append([]byte{ctl, byte(len(fr))}, fr...)
	}
	f.Add(mk(encap.MsgControl, hello, 0x12))
	f.Add(append(mk(encap.MsgAck, nil, 0x23), mk(encap.MsgNak, nil, 0x42)...))
	f.Add(mk(encap.MsgControl, reset, 0x13))
	tlpBody := []byte{0, 16, 0x40, 0, 0, 1, 0, 0, 0, 0x0f, 0x10, 0, 0, 0, 1, 2, 3, 4}
	f.Add(mk(encap.MsgTLP, tlpBody, 0x0a))
	f.Fuzz(func(t *testing.T, data []byte) {
		frames, ctl := fuzzFrames(data)
		if len(frames) > 64 {
			frames, ctl = frames[:64], ctl[:64]
		}
		sc := Scenario{
			Seed:            1,
			Faults:          memlink.Faults{Delay: 2 * time.Microsecond},
			Host:            bridge.Config{Window: 16, DeadAfter: 2 * time.Millisecond, Keepalive: 500 * time.Microsecond, CompletionTimeout: 5 * time.Millisecond},
			GPU:             bridge.Config{Window: 16, DeadAfter: 2 * time.Millisecond, Keepalive: 500 * time.Microsecond, CompletionTimeout: 5 * time.Millisecond},
			Count:           60,
			Interval:        time.Microsecond,
			MaxTime:         2 * time.Second,
			CheckInvariants: true,
			Setup: func(p *vpair.Pair) {
				at := 20 * time.Microsecond
				for i, fr := range frames {
					c := ctl[i]
					at += time.Duration(c>>2) * time.Microsecond
					fr := append([]byte(nil), fr...)
					if c&2 != 0 && len(fr) >= encap.HeaderLen {
						encap.Header(fr).SetVersionFlags(encap.Version, encap.Header(fr).Flags())
						encap.Header(fr).SetPairID(0)
						if encap.Header(fr).BodyLen() > len(fr)-encap.HeaderLen {
							binary.BigEndian.PutUint16(fr[6:], uint16(len(fr)-encap.HeaderLen))
						}
					}
					sd := p.Host
					if c&1 != 0 {
						sd = p.GPU
					}
					p.Sim.At(at, func() { sd.Inject(fr) })
				}
			},
		}
		r := sc.Run()
		for _, sd := range []*vpair.Side{r.Pair.Host, r.Pair.GPU} {
			if sd.InvariantErr != nil {
				t.Fatal(sd.InvariantErr)
			}
		}
		if !r.Finished {
			t.Fatalf("run did not finish: %v", r)
		}
		for _, e := range []*Endpoint{r.Host, r.GPU} {
			if e.ExtraCpls > 0 {
				t.Fatalf("%d requests answered twice: %v", e.ExtraCpls, r)
			}
			if e.Outstanding() > 0 || e.Completed+e.Failed != e.ReadsSent {
				t.Fatalf("requests: %d sent, %d completed, %d failed, %d outstanding", e.ReadsSent, e.Completed, e.Failed, e.Outstanding())
			}
		}
	})
}
