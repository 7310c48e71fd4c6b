package switching

import (
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/dxpu/dxpu/tlp/encap"
)

const (
	million = 1_000_000
	// Headroom is what Forward needs in front of a frame to push a VLAN tag.
	Headroom = encap.VLANTagLen
)

// Result is the decision for one frame.
type Result struct {
	Verdict Verdict
	Reason  Reason
	PairID  uint32 // 0 when the frame carried none
	Egress  uint32 // ifindex, for VerdictForward
	Off     int    // the (rewritten) frame is now buf[Off:]
}

type compiled struct {
	Rule
	counters *Counters
	// Port counters of each direction, resolved at Update so that the
	// forwarding path does no map lookups.
	inCtr, outCtr [2]*Counters
}

type ruleSet struct {
	byID  map[uint32]*compiled
	rules []Rule
}

// Forwarder is the userspace switch: Forward decides and rewrites one frame
// at a time, Update swaps in a new rule set atomically. It does no I/O;
// drivers (AF_PACKET, AF_XDP, tests) feed it.
type Forwarder struct {
	rules   atomic.Pointer[ruleSet]
	udpPort uint16
	// Rand returns uniform 32-bit numbers for DropPPM; replaceable in tests.
	Rand func() uint32

	mu       sync.Mutex // serialises Update and counter export
	pairCtrs map[uint32]*Counters
	portCtrs map[uint32]*Counters // by ifindex; 0 collects unmanaged ports
	// portCtrsPtr publishes portCtrs to Forward, which takes no lock.
	portCtrsPtr atomic.Pointer[map[uint32]*Counters]
	portNames   map[uint32]string
}

// NewForwarder returns a forwarder with an empty table, recognising UDP
// frames sent to udpPort (0: DefaultUDPPort).
func NewForwarder(udpPort uint16) *Forwarder {
	if udpPort == 0 {
		udpPort = DefaultUDPPort
	}
	f := &Forwarder{
		udpPort:   udpPort,
		Rand:      rand.Uint32,
		pairCtrs:  map[uint32]*Counters{},
		portNames: map[uint32]string{0: ""},
	}
	f.setPortCtrs(map[uint32]*Counters{0: {}})
	f.rules.Store(&ruleSet{byID: map[uint32]*compiled{}})
	return f
}

// UDPPort returns the UDP port dxpu frames are recognised by.
func (f *Forwarder) UDPPort() uint16 { return f.udpPort }

// SetPorts declares the switch's ports, for per-port counters.
func (f *Forwarder) SetPorts(ports map[string]Port) {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := map[uint32]string{0: ""}
	ctrs := map[uint32]*Counters{0: f.portCtrs[0]}
	for name, p := range ports {
		names[p.Index] = name
		if c, ok := f.portCtrs[p.Index]; ok {
			ctrs[p.Index] = c
		} else {
			ctrs[p.Index] = &Counters{}
		}
	}
	f.portNames = names
	// Forward reads portCtrs without the lock: publish a new map.
	f.setPortCtrs(ctrs)
	f.updateLocked(f.rules.Load().rules)
}

// Update replaces the rules. Frames decided after Update returns use the
// new rules only: a removed pair never forwards again.
func (f *Forwarder) Update(rules []Rule) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.updateLocked(rules)
}

func (f *Forwarder) updateLocked(rules []Rule) {
	rs := &ruleSet{byID: make(map[uint32]*compiled, len(rules)), rules: rules}
	ctrs := make(map[uint32]*Counters, len(rules))
	for _, r := range rules {
		c := f.pairCtrs[r.ID]
		if c == nil {
			c = &Counters{}
		}
		ctrs[r.ID] = c
		cr := &compiled{Rule: r, counters: c}
		for i := range cr.Dir {
			cr.inCtr[i] = f.portCounters(r.Dir[i].InPort)
			cr.outCtr[i] = f.portCounters(r.Dir[i].OutPort)
		}
		rs.byID[r.ID] = cr
	}
	f.pairCtrs = ctrs
	f.rules.Store(rs)
}

// Forward decides what happens to the frame buf[off:], received on port
// ingress (ifindex), and rewrites it in place when it is forwarded. Pushing
// a VLAN tag moves the frame's start Headroom bytes earlier, so off should
// be at least Headroom; Result.Off says where the frame now starts.
// Forward does not allocate and is safe for concurrent use.
func (f *Forwarder) Forward(buf []byte, off int, ingress uint32) Result {
	return f.decide(buf, off, ingress, false)
}

// ForwardControl is the slow path's decision for a frame Forward handed
// to it (VerdictSlowPath): CONTROL messages are the bridges' own link
// handshake and keepalives, so they are forwarded like data, with the same
// ingress checks, fault injection and rewrite; frames of unknown pairs are
// dropped. Only what Forward did not count is counted here (forwarding,
// spoofing, faults), so a frame is not counted twice.
func (f *Forwarder) ForwardControl(buf []byte, off int, ingress uint32) Result {
	return f.decide(buf, off, ingress, true)
}

func (f *Forwarder) decide(buf []byte, off int, ingress uint32, slow bool) Result {
	if off < 0 || off > len(buf) {
		return Result{Verdict: VerdictDrop, Reason: ReasonMalformed, Off: off}
	}
	frame := buf[off:]
	n := len(frame)
	res := Result{Off: off}
	// Port counters: the forwarding path takes them from the rule; the
	// other verdicts look the ingress port up (inCtr below).
	inCtr := lazyPort{f: f, ingress: ingress, quiet: slow}

	// One 802.1Q tag at most, as the XDP program reads: a QinQ frame is
	// not dxpu to the switch (encap.Walk reads two).
	if n < encap.EthHeaderLen {
		return f.notDXPU(res, inCtr, n)
	}
	proto := encap.Ethernet(frame).Type()
	l3 := encap.EthHeaderLen
	tagged := false
	if proto == encap.EtherTypeVLAN {
		if n < encap.EthHeaderLen+encap.VLANTagLen {
			return f.notDXPU(res, inCtr, n)
		}
		proto = encap.VLAN(frame[encap.EthTypeOffset:]).Next()
		l3 += encap.VLANTagLen
		tagged = true
	}
	var ip encap.IPv4 // nil on raw Ethernet
	var ihl, h int
	switch proto {
	case encap.EtherType:
		h = l3
	case encap.EtherTypeIPv4:
		// Looser than encap.Walk, as the XDP program is: no checksum or
		// length checks, any fragment is not dxpu.
		if n < l3+encap.IPv4HeaderLen {
			return f.notDXPU(res, inCtr, n)
		}
		ip = encap.IPv4(frame[l3:])
		ihl = ip.HeaderLen()
		if ip.Version() != encap.IPv4Version || ihl < encap.IPv4HeaderLen || ip.Protocol() != encap.IPProtoUDP ||
			ip.FlagsFrag()&(encap.IPv4FlagMF|encap.IPv4FragOffsetMask) != 0 {
			return f.notDXPU(res, inCtr, n)
		}
		if n < l3+ihl+encap.UDPHeaderLen || encap.UDP(frame[l3+ihl:]).DstPort() != f.udpPort {
			return f.notDXPU(res, inCtr, n)
		}
		h = l3 + ihl + encap.UDPHeaderLen
	default:
		return f.notDXPU(res, inCtr, n)
	}

	if n < h+encap.HeaderLen || encap.Header(frame[h:]).Version() != encap.Version {
		if slow {
			return Result{Verdict: VerdictDrop, Reason: ReasonMalformed, Off: off}
		}
		return f.finish(res, VerdictDrop, ReasonMalformed, nil, inCtr, n)
	}
	hdr := encap.Header(frame[h:])
	res.PairID = hdr.PairID()
	if hdr.Type() == encap.MsgControl && !slow {
		return f.finish(res, VerdictSlowPath, ReasonControl, nil, inCtr, n)
	}
	r := f.rules.Load().byID[res.PairID]
	if r == nil {
		if slow {
			res.Verdict, res.Reason = VerdictDrop, ReasonUnknownPair
			return res
		}
		return f.finish(res, VerdictSlowPath, ReasonUnknownPair, nil, inCtr, n)
	}

	var srcIP [4]byte
	if ip != nil {
		srcIP = [4]byte(ip.Src())
	}
	var d *Direction
	var reason Reason
	switch {
	case accepts(&r.Dir[0], ingress, frame, ip != nil, srcIP):
		d, reason = &r.Dir[0], ReasonToGPU
	case accepts(&r.Dir[1], ingress, frame, ip != nil, srcIP):
		d, reason = &r.Dir[1], ReasonToHost
	default:
		return f.finish(res, VerdictDrop, ReasonSpoofed, r.counters, inCtr, n)
	}
	if r.DropPPM != 0 && f.Rand()%million < r.DropPPM {
		return f.finish(res, VerdictDrop, ReasonFault, r.counters, inCtr, n)
	}

	if ip != nil {
		rewriteUDP(ip, ihl, d, f.udpPort)
	}
	switch {
	case tagged && r.VLAN != 0:
		encap.VLAN(frame[encap.EthTypeOffset:]).SetVID(r.VLAN)
	case tagged: // pop
		off += encap.VLANTagLen
	case r.VLAN != 0: // push
		if off < encap.VLANTagLen {
			return f.finish(res, VerdictDrop, ReasonNoRoom, r.counters, inCtr, n)
		}
		off -= encap.VLANTagLen
		tag := encap.VLAN(buf[off+encap.EthTypeOffset:])
		tag.SetTPID(encap.EtherTypeVLAN)
		tag.SetTCI(r.VLAN)
	}
	eth := encap.Ethernet(buf[off:])
	copy(eth.Dst(), d.DstMAC[:])
	copy(eth.Src(), d.PortMAC[:])
	res.Off = off
	res.Egress = d.OutPort
	res.Verdict, res.Reason = VerdictForward, reason
	dir := int(reason)           // ReasonToGPU = 0, ReasonToHost = 1
	tx := reason + ReasonTxToGPU // ReasonToHost+ReasonTxToGPU == ReasonTxToHost
	r.counters.Add(reason, n)
	r.counters.Add(tx, len(eth))
	r.inCtr[dir].Add(reason, n)
	r.outCtr[dir].Add(tx, len(eth))
	return res
}

// lazyPort names the ingress port's counters without looking them up.
type lazyPort struct {
	f       *Forwarder
	ingress uint32
	quiet   bool // ForwardControl: frames Forward already counted
}

func (l lazyPort) get() *Counters { return l.f.portCounters(l.ingress) }

func (f *Forwarder) notDXPU(res Result, inCtr lazyPort, n int) Result {
	if inCtr.quiet {
		res.Verdict, res.Reason = VerdictPass, ReasonNotDXPU
		return res
	}
	return f.finish(res, VerdictPass, ReasonNotDXPU, nil, inCtr, n)
}

func (f *Forwarder) finish(res Result, v Verdict, r Reason, pair *Counters, port lazyPort, n int) Result {
	res.Verdict, res.Reason = v, r
	pair.Add(r, n)
	port.get().Add(r, n)
	return res
}

func accepts(d *Direction, ingress uint32, frame []byte, isUDP bool, srcIP [4]byte) bool {
	if d.InPort != ingress || [6]byte(encap.Ethernet(frame).Src()) != d.SrcMAC {
		return false
	}
	return !isUDP || d.SrcIP == [4]byte{} || d.SrcIP == srcIP
}

// rewriteUDP rewrites addresses, ports and checksums of the IPv4 packet ip
// whose UDP header starts at ip[udp:].
func rewriteUDP(ip encap.IPv4, udp int, d *Direction, udpPort uint16) {
	le := binary.LittleEndian
	oldSrc, oldDst := le.Uint32(ip[encap.IPv4SrcOffset:]), le.Uint32(ip[encap.IPv4DstOffset:])
	newSrc, newDst := oldSrc, oldDst
	if d.NewSrcIP != [4]byte{} {
		newSrc = le.Uint32(d.NewSrcIP[:])
	}
	if d.NewDstIP != [4]byte{} {
		newDst = le.Uint32(d.NewDstIP[:])
	}
	// Ports as the XDP program holds them: wire order loaded little-endian.
	var sp, dp [2]byte
	binary.BigEndian.PutUint16(sp[:], udpPort)
	binary.BigEndian.PutUint16(dp[:], d.DstUDPPort)
	newSport, newDport := le.Uint16(sp[:]), le.Uint16(dp[:])
	u := ip[udp:]
	oldSport, oldDport := le.Uint16(u[encap.UDPSrcPortOffset:]), le.Uint16(u[encap.UDPDstPortOffset:])

	// One RFC 1624 update per checksum: ~HC + sum(~old) + sum(new).
	delta := notWords(oldSrc) + notWords(oldDst) + words(newSrc) + words(newDst)
	le.PutUint16(ip[encap.IPv4ChecksumOffset:], ^csumFold(uint32(^le.Uint16(ip[encap.IPv4ChecksumOffset:]))+delta))
	le.PutUint32(ip[encap.IPv4SrcOffset:], newSrc)
	le.PutUint32(ip[encap.IPv4DstOffset:], newDst)
	le.PutUint16(u[encap.UDPSrcPortOffset:], newSport)
	le.PutUint16(u[encap.UDPDstPortOffset:], newDport)
	if c := le.Uint16(u[encap.UDPChecksumOffset:]); c != 0 { // 0: no UDP checksum, keep it that way
		delta += uint32(^oldSport) + uint32(^oldDport) + uint32(newSport) + uint32(newDport)
		c = ^csumFold(uint32(^c) + delta)
		if c == 0 {
			c = 0xffff
		}
		le.PutUint16(u[encap.UDPChecksumOffset:], c)
	}
}

func (f *Forwarder) portCounters(ifindex uint32) *Counters {
	m := *f.portCtrsPtr.Load()
	if c, ok := m[ifindex]; ok {
		return c
	}
	return m[0]
}

func (f *Forwarder) setPortCtrs(m map[uint32]*Counters) {
	f.portCtrs = m
	f.portCtrsPtr.Store(&m)
}

// PairCounters implements CounterSource.
func (f *Forwarder) PairCounters(fn func(id uint32, c Counters)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, c := range f.pairCtrs {
		fn(id, c.Snapshot())
	}
	return nil
}

// PortCounters implements CounterSource.
func (f *Forwarder) PortCounters(fn func(port string, c Counters)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for idx, c := range f.portCtrs {
		fn(f.portNames[idx], c.Snapshot())
	}
	return nil
}
