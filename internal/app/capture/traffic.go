package capture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/google/gopacket"

	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// Traffic is what synthetic traffic to write.
type Traffic struct {
	Kinds   []tlp.Kind
	Encaps  []FrameEncap // cycled per frame
	Count   int          // frames
	Seed    uint64
	Pairs   int // host-GPU pairs
	MaxTLPs int // per dxpu frame
	MaxDW   int // per TLP
	MTU     int
	Control int // percent of dxpu frames that are ACK/NAK/CREDIT messages
	Snaplen int // cut records to this many bytes (0: whole frames)
}

// FrameEncap is one way to send a frame.
type FrameEncap struct {
	Encap encap.Encap
	VLAN  int // -1 untagged
}

func (e FrameEncap) String() string {
	if e.VLAN >= 0 {
		return fmt.Sprintf("%v+vlan%d", e.Encap, e.VLAN)
	}
	return e.Encap.String()
}

// pair is the addressing and link state of one host-GPU pair.
type pair struct {
	id        uint32
	mac       [2][6]byte // host, GPU
	ip        [2]netip.Addr
	seq       [2]uint32 // next sequence number per direction
	nettlpSeq [2]uint16
	requester [2]tlp.ID
	limits    [2][encap.NumCreditTypes]uint32
}

// baseTime is the timestamp of the first generated frame (fixed so that
// output is reproducible).
var baseTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// generate writes o.Count synthetic frames to w, or fewer and an error if
// ctx ends first.
func generate(ctx context.Context, w *pcapio.Writer, o Traffic) (stats map[string]int, err error) {
	r := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	gen := &tlpGen{r: r, kinds: o.Kinds, maxDW: max(1, o.MaxDW)}
	pairs := make([]*pair, max(1, o.Pairs))
	for i := range pairs {
		// Pair IDs spread over the 24-bit space, including the extremes.
		id := uint32(i+1) * 0x0b1d3f % 0xffffff
		if i == 1 {
			id = 0xffffff
		}
		p := &pair{id: id}
		for side := 0; side < 2; side++ {
			p.mac[side] = [6]byte{0x02, 0xd7, byte(id >> 16), byte(id >> 8), byte(id), byte(side + 1)}
			p.ip[side] = netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), byte(side + 1)})
			p.seq[side] = r.Uint32()
			p.requester[side] = tlp.NewID(uint8(side*0x40+i), uint8(i%32), 0)
			for t := range p.limits[side] {
				p.limits[side][t] = r.Uint32()
			}
		}
		pairs[i] = p
	}
	stats = map[string]int{}
	var frame, buf []byte
	tlps := make([][]byte, 0, encap.MaxTLPs)
	ts := baseTime
	for i := 0; i < o.Count; i++ {
		if i%checkEvery == 0 && ctx.Err() != nil {
			return nil, fmt.Errorf("interrupted after %d frames, left as it was: %w", i, ctx.Err())
		}
		ts = ts.Add(time.Duration(200 + r.IntN(1800)))
		p := pairs[r.IntN(len(pairs))]
		side := r.IntN(2)
		enc := o.Encaps[i%len(o.Encaps)]
		l2 := encap.L2{Dst: p.mac[1-side], Src: p.mac[side], Tagged: enc.VLAN >= 0, VLAN: uint16(max(enc.VLAN, 0)), PCP: uint8(r.IntN(8))}
		l3 := &encap.L3{Src: p.ip[side], Dst: p.ip[1-side], SrcPort: uint16(49152 + p.id%16384), ID: uint16(i)}
		switch enc.Encap {
		case encap.EncapNetTLP:
			buf, err = gen.next(buf[:0], p.requester[side])
			if err != nil {
				return nil, fmt.Errorf("generator made an invalid TLP (a bug): %w", err)
			}
			l3.SrcPort = 0
			frame, err = encap.AppendNetTLP(frame[:0], &l2, l3, p.nettlpSeq[side], uint32(ts.UnixNano()), buf)
			p.nettlpSeq[side]++
			stats[tlp.View(buf).Kind().String()]++
		default:
			if enc.Encap == encap.EncapDxpuEth {
				l3 = nil
			}
			f := encap.Fields{
				PairID: p.id, Flags: encap.FlagAck | encap.FlagCredit, Seq: p.seq[side], Ack: p.seq[1-side],
				Limits: p.limits[side], Infinite: 1<<encap.CreditCplH | 1<<encap.CreditCplD,
			}
			if r.IntN(100) < o.Control {
				f.Type = []encap.MsgType{encap.MsgAck, encap.MsgNak, encap.MsgCredit}[r.IntN(3)]
				frame, err = encap.AppendDxpuMsg(frame[:0], &l2, l3, &f, nil)
				stats[f.Type.String()]++
				break
			}
			pk := encap.Packer{L2: l2, L3: l3, MTU: o.MTU}
			buf = buf[:0]
			tlps = tlps[:0]
			want := 1 + r.IntN(max(1, o.MaxTLPs))
			for len(tlps) < want {
				start := len(buf)
				buf, err = gen.next(buf, p.requester[side])
				if err != nil {
					return nil, fmt.Errorf("generator made an invalid TLP (a bug): %w", err)
				}
				if !pk.Fits(len(buf) - start) {
					buf = buf[:start]
					break
				}
				tlps = append(tlps, buf[start:])
				pk.Add(buf[start:])
			}
			if len(tlps) == 0 { // the MTU is too small for this TLP: send it alone is impossible, skip
				i--
				continue
			}
			// buf may have moved while growing: re-slice the TLPs from it.
			off := 0
			for j := range tlps {
				n := len(tlps[j])
				tlps[j] = buf[off : off+n]
				off += n
			}
			for _, t := range tlps {
				stats[tlp.View(t).Kind().String()]++
			}
			p.seq[side] += uint32(len(tlps))
			if l3 == nil {
				frame, err = encap.AppendDxpuEth(frame[:0], &l2, &f, tlps)
			} else {
				frame, err = encap.AppendDxpuUDP(frame[:0], &l2, l3, &f, tlps)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("frame %d: %w", i+1, err)
		}
		stats["frames "+enc.String()]++
		data := frame
		if o.Snaplen > 0 && len(data) > o.Snaplen {
			data = data[:o.Snaplen]
		}
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(data), Length: len(frame)}, data); err != nil {
			return nil, err
		}
	}
	return stats, nil
}
