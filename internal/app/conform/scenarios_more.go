package conform

import (
	"fmt"

	"github.com/dxpu/dxpu/tlp/encap"
)

// The scenarios of the kit's second round, run after the first ones.
func init() {
	scenarios = append(scenarios,
		scenario{"credit-frames", (*kit).creditFrames},
		scenario{"handshake-edges", (*kit).handshakeEdges},
		scenario{"completions", (*kit).completionShapes},
	)
}

// tagSender is a transport that can send a frame behind VLAN tags
// (afpacket.Conn), each TPID<<16 | TCI.
type tagSender interface {
	SendTagged(frame []byte, tags ...uint32) error
}

// vlanFRM1 is the VLAN of the kit's tagged frame.
const vlanFRM1 = 5

// creditFrames judges HSK-5 (initial credits from the HELLO), CRD-8 (a
// header's infinite mask raises nothing), FRM-12 (a CREDIT frame with a
// body still applies) and FRM-1 (a padded Ethernet frame, and one behind
// an 802.1Q tag, still apply): the kit gives one completion header credit
// and raises it frame by frame.
func (k *kit) creditFrames() error {
	a := defaultAdvert()
	a.credits[encap.CreditCplH] = 1
	if err := k.begin(a); err != nil {
		return err
	}
	const n = 5
	var reads [][]byte
	for i := 0; i < n; i++ {
		reads = append(reads, memRead(k.kitID, k.newTag(), k.addr(4*i), 4))
	}
	if _, err := k.sendTLPs(reads...); err != nil {
		return err
	}
	if _, err := k.await(k.reply(), func() bool { return len(k.cpls) >= 1 }); err != nil {
		return err
	}
	if err := k.watch(3 * k.timers.Slack); err != nil {
		return err
	}
	switch got := len(k.cpls); {
	case got == 0:
		k.led.fail("HSK-5", "sent no completion within %v on the 1 CplH credit of the kit's HELLO", k.reply())
		return nil
	case got > 1:
		k.led.fail("HSK-5", "sent %d completions on the 1 CplH credit of the kit's HELLO", got)
		return nil
	}
	k.led.pass("HSK-5", "started from the kit's HELLO: 1 CplH credit, one completion, then a stall")

	// A header that claims CplH infinite, the HELLO having said finite.
	f := k.bare(encap.MsgAck)
	f[26] |= 1 << encap.CreditCplH
	if err := k.send(f); err != nil {
		return err
	}
	if err := k.watch(3 * k.timers.Slack); err != nil {
		return err
	}
	if len(k.cpls) > 1 {
		k.led.fail("CRD-8", "a frame header claiming CplH infinite (the kit's HELLO did not) let it send beyond the CplH limit")
		return nil
	}
	k.led.pass("CRD-8", "a header's infinite mask raised no limit")

	// Raise by one, in a frame the kit sends alone (silent after it, so
	// nothing else carries the new limit).
	hold := min(k.reply(), k.timers.DeadAfter/2)
	raise := func(body int, send func([]byte) error) (bool, error) {
		k.adv[encap.CreditCplH]++
		f := k.bare(encap.MsgCredit)
		if body > 0 {
			encap.Header(f).SetBodyLen(body)
			for i := 0; i < body; i++ {
				f = append(f, byte(k.rng.Uint32()))
			}
		}
		want := len(k.cpls) + 1
		k.silent = true
		defer func() { k.silent = false }()
		if err := send(f); err != nil {
			return false, err
		}
		ok, _, err := k.within(hold, func() bool { return len(k.cpls) >= want })
		return ok, err
	}
	ok, err := raise(8, k.send)
	if err != nil {
		return err
	}
	if ok {
		k.led.pass("FRM-12", "a CREDIT frame with 8 body bytes applied")
	} else {
		k.led.fail("FRM-12", "a CREDIT frame with an 8-byte body raising the CplH limit released no completion within %v", hold)
	}
	// A bare CREDIT frame, padded to the Ethernet minimum of 60 bytes;
	// then the same behind an 802.1Q tag, where the kit's transport can
	// tag.
	// Padded to the Ethernet minimum (46 bytes after the Ethernet header)
	// here, a virtual link (veth) does not; after the seal, as a link pads.
	padded := func(b []byte) []byte {
		if k.keys != nil {
			b = k.keys.seal(k.end, k.now(), b)
		}
		for !k.exact && len(b) < 46 { // over UDP a padded datagram is malformed (FRM-2)
			b = append(b, 0)
		}
		return b
	}
	ok, err = raise(0, func(b []byte) error { return k.sendWire(padded(b)) })
	ts, tags := k.link.t.(tagSender)
	switch {
	case err != nil:
		return err
	case k.exact:
		k.led.na("FRM-1", "raw Ethernet only (--peer eth:IFACE:MAC); this run is over UDP")
	case !ok:
		k.led.fail("FRM-1", "a CREDIT frame padded to the Ethernet minimum, raising the CplH limit, released no completion within %v", hold)
	case !tags:
		k.led.pass("FRM-1", "a CREDIT frame padded to the Ethernet minimum applied: the body length, not the frame, delimits it")
	default:
		ok, err = raise(0, func(b []byte) error {
			k.lastSent = k.now()
			if err := ts.SendTagged(padded(b), encap.EtherTypeVLAN<<16|vlanFRM1); err != nil {
				return fmt.Errorf("send: %w", err)
			}
			return nil
		})
		switch {
		case err != nil:
			return err
		case ok:
			k.led.pass("FRM-1", "CREDIT frames padded to the Ethernet minimum, and behind an 802.1Q tag (VLAN %d), applied: the body length, not the frame, delimits them", vlanFRM1)
		default:
			k.led.fail("FRM-1", "a CREDIT frame behind an 802.1Q tag (VLAN %d), raising the CplH limit, released no completion within %v", vlanFRM1, hold)
		}
	}
	k.adv[encap.CreditCplH] += n
	if err := k.sendCredit(); err != nil {
		return err
	}
	_, err = k.await(k.reply(), func() bool { return len(k.cpls) >= n })
	return err
}

// handshakeEdges judges HSK-6: a HELLO-ACK of a new kit session (no HELLO)
// is answered with its echo; while the IUT waits for the kit's echo, a
// stale ACK frame (an Ack other than its ISN) must not bring it up, and
// one with Ack = its ISN must. Then CTL-1's trailing bytes.
func (k *kit) handshakeEdges() error {
	if err := k.begin(defaultAdvert()); err != nil {
		return err
	}
	old := k.iut.Session
	k.newSession(k.now(), defaultAdvert())
	k.iutKnown = false
	k.silent = true
	defer func() { k.silent = false }()
	if err := k.send(k.hello(encap.CtlHelloAck)); err != nil {
		return err
	}
	ok, err := k.await(k.reply(), func() bool { return k.up && k.iutKnown && k.iut.Session != old })
	if err != nil {
		return err
	}
	if !ok {
		k.led.fail("HSK-6", "a HELLO-ACK of a new kit session (no HELLO before it) was not answered with its echo within %v", k.reply())
		return nil
	}
	if k.iutUp {
		return nil // up already: nothing left to judge of the stale frame
	}
	isn := k.iut.ISN
	stale := k.bare(encap.MsgAck)
	encap.Header(stale).SetAck(isn + 0x10000)
	if err := k.send(stale); err != nil {
		return err
	}
	wait := k.timers.Keepalive + 2*k.timers.Slack
	if up, _, err := k.within(wait, func() bool { return k.iutUp }); err != nil {
		return err
	} else if up {
		k.led.fail("HSK-6", "an ACK frame with Ack %#x, not its ISN %#x (a stale frame), completed the handshake", isn+0x10000, isn)
		return nil
	}
	if err := k.send(k.bare(encap.MsgAck)); err != nil {
		return err
	}
	if up, _, err := k.within(k.reply(), func() bool { return k.iutUp }); err != nil {
		return err
	} else if !up {
		k.led.fail("HSK-3", "an ACK frame with Ack = its ISN %#x did not complete the handshake within %v", isn, k.reply())
		return nil
	}
	k.led.pass("HSK-6", "a HELLO-ACK while not up answered with its echo; a stale ACK ignored, one with Ack = the ISN completed the handshake")
	k.silent = false

	// CTL-1: bytes after a control message's length are ignored.
	k.kaProbe++
	if k.kaProbe == 0 {
		k.kaProbe = 1
	}
	p := k.kaProbe
	k.kaSent[p] = true // its answer is no stray (CTL-3)
	ka := k.control(encap.Control{Type: encap.CtlKeepalive, PeerSession: k.iut.Session, Probe: p})
	encap.Header(ka).SetBodyLen(encap.ControlLen + 4)
	ka = append(ka, 0xa5, 0xa5, 0xa5, 0xa5)
	if err := k.send(ka); err != nil {
		return err
	}
	if ok, err := k.await(k.reply(), func() bool { _, ok := k.kaAcks[p]; return ok }); err != nil {
		return err
	} else if !ok {
		k.led.fail("CTL-1", "a KEEPALIVE with 4 bytes after its 12 was not answered within %v (bytes after a control message's length must be ignored)", k.reply())
	}
	return nil
}

// completionShapes judges TAG-6 (a read that fits one completion gets
// one), ORD-1 (a write does not pass an earlier write) and ORD-5 (the
// completions of a split read in address order).
func (k *kit) completionShapes() error {
	if err := k.begin(defaultAdvert()); err != nil {
		return err
	}
	tag := k.newTag()
	at := k.addr(8)
	if _, err := k.sendTLPs(memRead(k.kitID, tag, at, 8)); err != nil {
		return err
	}
	if ok, err := k.await(k.reply(), func() bool { return k.completions(tag) > 0 }); err != nil || !ok {
		k.led.na("TAG-6", "an 8-byte read was not completed within %v", k.reply())
		return err
	}
	if err := k.watch(2 * k.timers.Slack); err != nil {
		return err
	}
	c, _ := k.completion(tag)
	v := c.view()
	switch n := k.completions(tag); {
	case n != 1:
		k.led.fail("TAG-6", "an 8-byte read at %#x was answered with %d completions, want 1", at, n)
	case v.ByteCount() != 8 || v.LowerAddress() != uint8(at&0x7f) || v.PayloadLen() != 8:
		k.led.fail("TAG-6", "the completion of an 8-byte read at %#x has Byte Count %d, Lower Address %#x, %d bytes; want 8, %#x, 8", at, v.ByteCount(), v.LowerAddress(), v.PayloadLen(), at&0x7f)
	default:
		k.led.pass("TAG-6", "a read that fits one completion got exactly one, Byte Count and Lower Address right")
	}

	// Two writes to one address, each in its own frame, then a read.
	first, second := make([]byte, 8), make([]byte, 8)
	for i := range first {
		first[i], second[i] = byte(k.rng.Uint32()), byte(k.rng.Uint32())
	}
	second[0] = first[0] ^ 0xff // they differ
	wa := k.addr(16)
	for _, d := range [][]byte{first, second} {
		if _, err := k.sendTLPs(memWrite(k.kitID, wa, d)); err != nil {
			return err
		}
	}
	rt := k.newTag()
	if _, err := k.sendTLPs(memRead(k.kitID, rt, wa, 8)); err != nil {
		return err
	}
	if ok, err := k.await(k.reply(), func() bool { return k.completions(rt) > 0 }); err != nil {
		return err
	} else if ok {
		c, _ := k.completion(rt)
		switch got := c.view().Payload(); {
		case string(got) == string(second):
			k.led.pass("ORD-1", "a write did not pass an earlier write to the same address")
		case string(got) == string(first):
			k.led.fail("ORD-1", "two writes to %#x, then a read: it returned the first write's data, the second write passed it", wa)
		}
	}

	// A read that needs several completions.
	const big = 512
	if k.opt.Size < big+64 {
		k.led.na("ORD-5", "the memory window (--size %d) is too small for a %d-byte read", k.opt.Size, big)
		return nil
	}
	bt := k.newTag()
	ba := k.opt.Addr + 32 // not on a completion boundary: the first part is short
	if _, err := k.sendTLPs(memRead(k.kitID, bt, ba, big)); err != nil {
		return err
	}
	got := func() int {
		n := 0
		for _, c := range k.cpls {
			if v := c.view(); v.Tag() == bt {
				n += v.PayloadLen()
			}
		}
		return n
	}
	ok, err := k.await(k.reply(), func() bool { return got() >= big })
	if err != nil {
		return err
	}
	var parts []rxTLP
	for _, c := range k.cpls {
		if c.view().Tag() == bt {
			parts = append(parts, c)
		}
	}
	// Order first: a completer that sends the last part first ends the
	// request there (its Byte Count is all it says is left), so the kit
	// matches nothing after it and the rest never counts.
	owed := big
	for i, c := range parts {
		v := c.view()
		if v.ByteCount() != owed {
			k.led.fail("ORD-5", "completion %d of %d of a %d-byte read has Byte Count %d, %d bytes were still owed: out of order", i+1, len(parts), big, v.ByteCount(), owed)
			return nil
		}
		owed -= v.PayloadLen() - int(v.LowerAddress()&3)
	}
	if !ok {
		k.led.fail("ORD-5", "a %d-byte read got %d bytes of completions within %v", big, got(), k.reply())
		return nil
	}
	if len(parts) < 2 {
		k.led.na("ORD-5", "the %d-byte read came back in one completion: nothing to order", big)
		return nil
	}
	k.led.pass("ORD-5", "the %d completions of a %d-byte read came in address order", len(parts), big)
	return nil
}
