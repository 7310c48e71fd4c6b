package capture

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/dxpu/dxpu/tlp"
)

// allKinds is every TLP kind the generator makes, in tlp's order.
var allKinds = []tlp.Kind{
	tlp.MRd, tlp.MRdLk, tlp.MWr, tlp.IORd, tlp.IOWr, tlp.CfgRd0, tlp.CfgWr0, tlp.CfgRd1, tlp.CfgWr1,
	tlp.Msg, tlp.MsgD, tlp.Cpl, tlp.CplD, tlp.CplLk, tlp.CplDLk, tlp.FetchAdd, tlp.Swap, tlp.CAS,
}

// ParseKinds reads --kind: "mix" (all kinds, memory traffic weighted
// as in real workloads), "mem" (MRd, MWr, Cpl, CplD) or a comma-separated
// list of kind names.
func ParseKinds(s string) ([]tlp.Kind, error) {
	switch s {
	case "mix":
		// Every kind once, plus extra weight on the memory traffic that
		// dominates real captures.
		return append(append([]tlp.Kind(nil), allKinds...),
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

// message is a message code with its routing.
type message struct {
	code    uint8
	routing tlp.Routing
	data    bool // sent as MsgD
	vendor  bool // vendor-defined: any TC, several routings, Msg or MsgD
}

var messages = []message{
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

// tlpGen makes random TLPs that obey the specification's rules, so
// that every one passes tlp.Parse.
type tlpGen struct {
	r     *rand.Rand
	kinds []tlp.Kind
	maxDW int // longest payload or read, in DWs
}

func (g *tlpGen) pick(xs ...uint8) uint8 { return xs[g.r.IntN(len(xs))] }

// memAddr returns a DW-aligned address where n DWs do not cross 4 KiB,
// above 4 GiB when wide.
func (g *tlpGen) memAddr(n int, wide bool) uint64 {
	page := uint64(g.r.Uint32() >> 12 << 12)
	if wide {
		page |= uint64(1+g.r.IntN(0xffff)) << 32
	}
	off := uint64(4 * g.r.IntN((4096-4*n)/4+1))
	return page | off
}

func (g *tlpGen) bes(n int) (first, last uint8) {
	if n == 1 {
		return uint8(g.r.IntN(16)), 0
	}
	return g.pick(0xf, 0xe, 0xc, 0x8), g.pick(0xf, 0x7, 0x3, 0x1)
}

func (g *tlpGen) data(n int) []byte {
	b := make([]byte, 4*n)
	for i := range b {
		b[i] = byte(g.r.Uint32())
	}
	return b
}

// next appends one random TLP from requester (or to requester, for
// completions) to dst.
func (g *tlpGen) next(dst []byte, requester tlp.ID) ([]byte, error) {
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
		m := messages[g.r.IntN(len(messages))]
		for m.data != (k == tlp.MsgD) && !m.vendor {
			m = messages[g.r.IntN(len(messages))]
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
