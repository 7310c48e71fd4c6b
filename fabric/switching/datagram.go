package switching

import (
	"net/netip"

	"github.com/dxpu/dxpu/tlp/encap"
)

// ForwardDatagram is the decision of a switch that is a UDP socket (mode
// "udp": no raw sockets, no root): payload is a received UDP payload that
// should start with a dxpu header, from its sender. The rules are those of
// Forward with addresses in place of ports and MACs: a frame of pair P is
// accepted only from P.Host's IP and UDP port (8855 when the table gives
// none), and then goes to P.GPU's, or the other way round; endpoints
// without an IP address never match. The payload is not modified. Counters
// are kept on the pair and on port index udpIndex.
func (f *Forwarder) ForwardDatagram(payload []byte, from netip.AddrPort, udpIndex uint32) (netip.AddrPort, Result) {
	return f.forwardDatagram(payload, from, udpIndex, false)
}

// ForwardDatagramControl is ForwardControl for datagrams: the slow path
// forwards CONTROL messages like data and drops unknown pairs, counting
// only what ForwardDatagram did not.
func (f *Forwarder) ForwardDatagramControl(payload []byte, from netip.AddrPort, udpIndex uint32) (netip.AddrPort, Result) {
	return f.forwardDatagram(payload, from, udpIndex, true)
}

func (f *Forwarder) forwardDatagram(payload []byte, from netip.AddrPort, udpIndex uint32, slow bool) (netip.AddrPort, Result) {
	n := len(payload)
	res := Result{}
	inCtr := lazyPort{f: f, ingress: udpIndex}
	if n < encap.HeaderLen || encap.Header(payload).Version() != encap.Version {
		if slow {
			res.Verdict, res.Reason = VerdictDrop, ReasonMalformed
			return netip.AddrPort{}, res
		}
		return netip.AddrPort{}, f.finish(res, VerdictDrop, ReasonMalformed, nil, inCtr, n)
	}
	res.PairID = encap.Header(payload).PairID()
	if encap.Header(payload).Type() == encap.MsgControl && !slow {
		return netip.AddrPort{}, f.finish(res, VerdictSlowPath, ReasonControl, nil, inCtr, n)
	}
	r := f.rules.Load().byID[res.PairID]
	if r == nil {
		if slow {
			res.Verdict, res.Reason = VerdictDrop, ReasonUnknownPair
			return netip.AddrPort{}, res
		}
		return netip.AddrPort{}, f.finish(res, VerdictSlowPath, ReasonUnknownPair, nil, inCtr, n)
	}
	src := from.Addr().Unmap()
	var d *Direction
	var reason Reason
	switch {
	case datagramFrom(&r.Dir[0], src, from.Port()):
		d, reason = &r.Dir[0], ReasonToGPU
	case datagramFrom(&r.Dir[1], src, from.Port()):
		d, reason = &r.Dir[1], ReasonToHost
	default:
		return netip.AddrPort{}, f.finish(res, VerdictDrop, ReasonSpoofed, r.counters, inCtr, n)
	}
	if r.DropPPM != 0 && f.Rand()%million < r.DropPPM {
		return netip.AddrPort{}, f.finish(res, VerdictDrop, ReasonFault, r.counters, inCtr, n)
	}
	if d.NewDstIP == [4]byte{} {
		return netip.AddrPort{}, f.finish(res, VerdictDrop, ReasonNoRoom, r.counters, inCtr, n)
	}
	tx := reason + ReasonTxToGPU
	inCtr.get().Add(tx, n)
	r.counters.Add(tx, n)
	res.Egress = udpIndex
	return netip.AddrPortFrom(netip.AddrFrom4(d.NewDstIP), d.DstUDPPort), f.finish(res, VerdictForward, reason, r.counters, inCtr, n)
}

func datagramFrom(d *Direction, src netip.Addr, port uint16) bool {
	return d.SrcIP != [4]byte{} && src.Is4() && src.As4() == d.SrcIP && port == d.SrcUDPPort
}
