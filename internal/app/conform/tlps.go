package conform

import (
	"github.com/dxpu/dxpu/bridge/nettlpside"
	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
)

// kitMemory is where the requests the stub issues go: memory on the kit's
// side, which answers with nettlpside.DoorbellReadData.
const kitMemory = 0x4000_0000

func mustTLP(p tlp.Packet) []byte {
	b, err := p.AppendTo(nil)
	if err != nil {
		// The kit builds only TLPs it knows to be valid; a failure here
		// is the kit's bug, reported as an empty (dropped) TLP.
		return nil
	}
	return b
}

func memWrite(req tlp.ID, addr uint64, data []byte) []byte {
	p := tlp.Packet{Kind: tlp.MWr, RequesterID: req, FirstBE: 0xf, Address: addr, Data: data}
	if len(data) > 4 {
		p.LastBE = 0xf
	}
	return mustTLP(p)
}

func memRead(req tlp.ID, tag uint16, addr uint64, n int) []byte {
	p := tlp.Packet{Kind: tlp.MRd, Length: uint16(n / 4), RequesterID: req, Tag: tag, FirstBE: 0xf, Address: addr}
	if n > 4 {
		p.LastBE = 0xf
	}
	return mustTLP(p)
}

// completionFor answers request r from completer with the kit's memory:
// the pattern the test target checks (nettlpside.DoorbellReadData).
func completionFor(r tlp.View, completer tlp.ID) []byte {
	data := make([]byte, 4*r.Length())
	for j := range data {
		data[j] = nettlpside.DoorbellReadData(r.Address() + uint64(j))
	}
	p := tlp.Packet{Kind: tlp.CplD, CompleterID: completer, RequesterID: r.RequesterID(), Tag: r.Tag(),
		ByteCount: uint16(r.RequestBytes()), LowerAddress: r.RequestLowerAddress(), Data: data}
	return mustTLP(p)
}

// newTag returns the next tag of the IUT's tag space for a kit request.
func (k *kit) newTag() uint16 {
	base, n := 0, 256
	if k.iut.TagBits == 10 {
		base, n = 256, 768
	}
	k.nextTag++
	return uint16(base + k.nextTag%n)
}

func (k *kit) addr(off int) uint64 { return k.opt.Addr + uint64(off%k.opt.Size) }

// completion returns the first completion the IUT returned for tag.
func (k *kit) completion(tag uint16) (rxTLP, bool) {
	for _, c := range k.cpls {
		if c.view().Tag() == tag {
			return c, true
		}
	}
	return rxTLP{}, false
}

func (k *kit) completions(tag uint16) int {
	n := 0
	for _, c := range k.cpls {
		if c.view().Tag() == tag {
			n++
		}
	}
	return n
}

// request returns the IUT's request from the stub with local tag t (the
// stub's requester ID and address tell it apart), as received.
func (k *kit) request(addr uint64) (rxTLP, bool) {
	for _, r := range k.inbox {
		if v := r.view(); v.Kind().IsRequest() && v.Address() == addr {
			return r, true
		}
	}
	return rxTLP{}, false
}

// complete answers the IUT's request r.
func (k *kit) complete(r rxTLP) error {
	v := r.view()
	delete(k.tags, v.Tag())
	_, err := k.sendTLPs(completionFor(v, k.kitID))
	return err
}

// rawFrame builds a TLP frame that the kit does not number or keep.
func (k *kit) rawFrame(pair uint32, seq uint32, tlps ...[]byte) []byte {
	size := 0
	for _, t := range tlps {
		size += 2 + len(t)
	}
	b := k.header(encap.MsgTLP, len(tlps), size, seq)
	encap.Header(b).SetPairID(pair)
	for _, t := range tlps {
		b = append(b, byte(len(t)>>8), byte(len(t)))
	}
	for _, t := range tlps {
		b = append(b, t...)
	}
	return b
}
