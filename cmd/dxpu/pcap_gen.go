package main

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"time"

	"github.com/google/gopacket"

	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// pcapAllKinds is every TLP kind the generator makes, in tlp's order.
var pcapAllKinds = []tlp.Kind{
	tlp.MRd, tlp.MRdLk, tlp.MWr, tlp.IORd, tlp.IOWr, tlp.CfgRd0, tlp.CfgWr0, tlp.CfgRd1, tlp.CfgWr1,
	tlp.Msg, tlp.MsgD, tlp.Cpl, tlp.CplD, tlp.CplLk, tlp.CplDLk, tlp.FetchAdd, tlp.Swap, tlp.CAS,
}

// pcapParseKinds reads --kind: "mix" (all kinds, memory traffic weighted
// as in real workloads), "mem" (MRd, MWr, Cpl, CplD) or a comma-separated
// list of kind names.
func pcapParseKinds(s string) ([]tlp.Kind, error) {
	switch s {
	case "mix":
		// Every kind once, plus extra weight on the memory traffic that
		// dominates real captures.
		return append(append([]tlp.Kind(nil), pcapAllKinds...),
			tlp.MRd, tlp.MRd, tlp.MWr, tlp.MWr, tlp.MWr, tlp.CplD, tlp.CplD, tlp.CplD, tlp.Cpl), nil
	case "mem":
		return []tlp.Kind{tlp.MRd, tlp.MWr, tlp.CplD, tlp.Cpl}, nil
	}
	var out []tlp.Kind
	for _, name := range strings.Split(s, ",") {
		k, ok := tlp.ParseKind(strings.TrimSpace(name))
		if !ok {
			return nil, fmt.Errorf("unknown TLP kind %q (want mix, mem or names such as MRd,CplD)", name)
		}
		out = append(out, k)
	}
	return out, nil
}

// pcapMessage is a message code with its routing.
type pcapMessage struct {
	code    uint8
	routing tlp.Routing
	data    bool // sent as MsgD
	vendor  bool // vendor-defined: any TC, several routings, Msg or MsgD
}

var pcapMessages = []pcapMessage{
	{0x00, tlp.RouteBroadcast, false, false}, // Unlock
	{0x14, tlp.RouteLocal, false, false},     // PM_Active_State_Nak
	{0x18, tlp.RouteToRC, false, false},      // PM_PME
	{0x19, tlp.RouteBroadcast, false, false}, // PME_Turn_Off
	{0x1b, tlp.RouteGather, false, false},    // PME_TO_Ack
	{0x20, tlp.RouteLocal, false, false},     // Assert_INTA
	{0x21, tlp.RouteLocal, false, false},     // Assert_INTB
	{0x24, tlp.RouteLocal, false, false},     // Deassert_INTA
	{0x30, tlp.RouteToRC, false, false},      // ERR_COR
	{0x31, tlp.RouteToRC, false, false},      // ERR_NONFATAL
	{0x33, tlp.RouteToRC, false, false},      // ERR_FATAL
	{0x50, tlp.RouteLocal, true, false},      // Set_Slot_Power_Limit (1 DW)
	{0x7e, 0, false, true},                   // Vendor_Defined Type 0
	{0x7f, 0, false, true},                   // Vendor_Defined Type 1
}

// pcapTLPGen makes random TLPs that obey the specification's rules, so
// that every one passes tlp.Parse.
type pcapTLPGen struct {
	r     *rand.Rand
	kinds []tlp.Kind
	maxDW int // longest payload or read, in DWs
}

func (g *pcapTLPGen) pick(xs ...uint8) uint8 { return xs[g.r.IntN(len(xs))] }

// memAddr returns a DW-aligned address where n DWs do not cross 4 KiB,
// above 4 GiB when wide.
func (g *pcapTLPGen) memAddr(n int, wide bool) uint64 {
	page := uint64(g.r.Uint32() >> 12 << 12)
	if wide {
		page |= uint64(1+g.r.IntN(0xffff)) << 32
	}
	off := uint64(4 * g.r.IntN((4096-4*n)/4+1))
	return page | off
}

func (g *pcapTLPGen) bes(n int) (first, last uint8) {
	if n == 1 {
		return uint8(g.r.IntN(16)), 0
	}
	return g.pick(0xf, 0xe, 0xc, 0x8), g.pick(0xf, 0x7, 0x3, 0x1)
}

func (g *pcapTLPGen) data(n int) []byte {
	b := make([]byte, 4*n)
	for i := range b {
		b[i] = byte(g.r.Uint32())
	}
	return b
}

// next appends one random TLP from requester (or to requester, for
// completions) to dst.
func (g *pcapTLPGen) next(dst []byte, requester tlp.ID) ([]byte, error) {
	k := g.kinds[g.r.IntN(len(g.kinds))]
	p := tlp.Packet{
		Kind: k, RequesterID: requester, Tag: uint16(g.r.IntN(1024)),
		TD: g.r.IntN(10) == 0,
	}
	if k.HasData() {
		p.EP = g.r.IntN(50) == 0 // poisoning concerns data
	}
	n := 1 + g.r.IntN(g.maxDW)
	if g.r.IntN(2) == 0 {
		n = 1 + g.r.IntN(min(g.maxDW, 4)) // many small TLPs, as in doorbells and descriptors
	}
	switch {
	case k == tlp.MRd || k == tlp.MRdLk || k == tlp.MWr:
		p.TC, p.Attr = uint8(g.r.IntN(8)), uint8(g.r.IntN(8))
		p.Length = uint16(n)
		p.FirstBE, p.LastBE = g.bes(n)
		p.Addr64 = g.r.IntN(3) == 0
		if k == tlp.MRdLk { // locked transactions: TC0, legacy 32-bit space
			p.TC, p.Addr64 = 0, false
		}
		p.Address = g.memAddr(n, p.Addr64)
		if k == tlp.MWr {
			p.Length = 0
			p.Data = g.data(n)
		}
	case k.IsIO() || k.IsConfig():
		p.Length = 1
		p.FirstBE = uint8(g.r.IntN(16))
		if k.IsIO() {
			p.Address = uint64(g.r.Uint32() &^ 3)
		} else {
			p.TargetID = tlp.ID(g.r.Uint32())
			p.Register = uint16(4 * g.r.IntN(1024))
		}
		if k == tlp.IOWr || k == tlp.CfgWr0 || k == tlp.CfgWr1 {
			p.Length = 0
			p.Data = g.data(1)
		}
	case k.IsMessage():
		// Real message codes with the routing and TC the specification
		// gives them; vendor-defined messages take any TC and the routings
		// allowed to them. (No base-specification message is routed by
		// address, so none is generated.)
		m := pcapMessages[g.r.IntN(len(pcapMessages))]
		for m.data != (k == tlp.MsgD) && !m.vendor {
			m = pcapMessages[g.r.IntN(len(pcapMessages))]
		}
		p.MessageCode, p.Routing = m.code, m.routing
		if m.vendor {
			p.TC = uint8(g.r.IntN(8))
			p.Routing = []tlp.Routing{tlp.RouteToRC, tlp.RouteByID, tlp.RouteBroadcast, tlp.RouteLocal}[g.r.IntN(4)]
			p.MsgDW3 = g.r.Uint32()
			p.MsgDW2 = 0x1af4 // vendor ID in DW2 15:0
		}
		if p.Routing == tlp.RouteByID {
			p.TargetID = tlp.ID(g.r.Uint32())
		}
		if k == tlp.MsgD {
			p.Data = g.data(1)
			if m.vendor {
				p.Data = g.data(min(n, 4))
			}
		}
	case k.IsCompletion():
		p.TC, p.Attr = uint8(g.r.IntN(8)), uint8(g.r.IntN(4))
		if k == tlp.CplLk || k == tlp.CplDLk {
			p.TC = 0 // locked transactions use TC0
		}
		p.CompleterID = tlp.ID(g.r.Uint32())
		if k == tlp.Cpl || k == tlp.CplLk {
			p.Status = tlp.Status(g.pick(0, 1, 2, 4)) // SC, UR, CRS, CA
			if p.Status == 0 || p.Status == 2 {
				// SC without data ends an IO or config write; CRS answers a
				// config request: 4 bytes from offset 0.
				p.ByteCount, p.LowerAddress = 4, 0
			} else {
				p.ByteCount, p.LowerAddress = uint16(1+g.r.IntN(4096)), uint8(g.r.IntN(128))
			}
		} else {
			// Byte Count must cover the data from Lower Address's offset.
			p.LowerAddress = uint8(g.r.IntN(128))
			need := 4*n - int(p.LowerAddress&3) - 3
			p.ByteCount = uint16(min(4096, max(need, 1)+g.r.IntN(512)))
			p.Data = g.data(n)
		}
	case k.IsAtomic():
		p.TC = uint8(g.r.IntN(8))
		p.Addr64 = g.r.IntN(2) == 0
		p.Address = g.memAddr(4, p.Addr64) &^ 15
		ops := []int{1, 2}
		if k == tlp.CAS {
			ops = []int{2, 4, 8}
		}
		p.Data = g.data(ops[g.r.IntN(len(ops))])
	}
	return p.AppendTo(dst)
}

// pcapGenOptions configure synthetic traffic.
type pcapGenOptions struct {
	Kinds   []tlp.Kind
	Encaps  []pcapGenEncap // cycled per frame
	Count   int            // frames
	Seed    uint64
	Pairs   int // host-GPU pairs
	MaxTLPs int // per dxpu frame
	MaxDW   int // per TLP
	MTU     int
	Control int // percent of dxpu frames that are ACK/NAK/CREDIT messages
	Snaplen int // cut records to this many bytes (0: whole frames)
}

// pcapGenEncap is one way to send a frame.
type pcapGenEncap struct {
	Encap encap.Encap
	VLAN  int // -1 untagged
}

func (e pcapGenEncap) String() string {
	if e.VLAN >= 0 {
		return fmt.Sprintf("%v+vlan%d", e.Encap, e.VLAN)
	}
	return e.Encap.String()
}

// pcapPair is the addressing and link state of one host-GPU pair.
type pcapPair struct {
	id        uint32
	mac       [2][6]byte // host, GPU
	ip        [2]netip.Addr
	seq       [2]uint32 // next sequence number per direction
	nettlpSeq [2]uint16
	requester [2]tlp.ID
	limits    [2][encap.NumCreditTypes]uint32
}

// pcapBaseTime is the timestamp of the first generated frame (fixed so that
// output is reproducible).
var pcapBaseTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// pcapGenerate writes o.Count synthetic frames to w.
func pcapGenerate(w *pcapio.Writer, o pcapGenOptions) (stats map[string]int, err error) {
	r := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	gen := &pcapTLPGen{r: r, kinds: o.Kinds, maxDW: max(1, o.MaxDW)}
	pairs := make([]*pcapPair, max(1, o.Pairs))
	for i := range pairs {
		// Pair IDs spread over the 24-bit space, including the extremes.
		id := uint32(i+1) * 0x0b1d3f % 0xffffff
		if i == 1 {
			id = 0xffffff
		}
		p := &pcapPair{id: id}
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
	ts := pcapBaseTime
	for i := 0; i < o.Count; i++ {
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
