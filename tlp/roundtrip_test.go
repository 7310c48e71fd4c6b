package tlp

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"
)

// randPacket returns a random valid TLP of kind k, with fields in the
// canonical form Decode produces.
func randPacket(r *rand.Rand, k Kind) Packet {
	p := Packet{
		Kind: k, TC: uint8(r.IntN(8)), Attr: uint8(r.IntN(8)), TH: r.IntN(2) == 0, TD: r.IntN(4) == 0,
		EP: r.IntN(8) == 0, LN: r.IntN(8) == 0, AT: uint8(r.IntN(4)),
		RequesterID: ID(r.Uint32()), Tag: uint16(r.IntN(1024)),
	}
	data := func(n int) []byte {
		b := make([]byte, 4*n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	pickAddr := func(align uint64, bytes int) uint64 {
		if r.IntN(2) == 0 {
			p.Addr64 = true
		}
		var page uint64
		if p.Addr64 {
			page = r.Uint64() & 0x000f_ffff_ffff_f000
		} else {
			page = uint64(r.Uint32()) & 0xffff_f000
		}
		slots := (4096 - bytes) / int(align)
		a := page + uint64(r.IntN(slots+1))*align
		if a > 0xffffffff {
			p.Addr64 = true
		}
		return a
	}
	switch {
	case k == MRd || k == MRdLk || k == MWr:
		n := 1 + r.IntN(1024)
		if r.IntN(2) == 0 {
			n = 1 + r.IntN(8)
		}
		p.Length = uint16(n)
		p.Address = pickAddr(4, 4*n)
		p.PH = uint8(r.IntN(4))
		switch {
		case p.TH && k != MWr:
			p.FirstBE, p.LastBE = uint8(r.IntN(16)), uint8(r.IntN(16))
		case n == 1:
			p.FirstBE = uint8(r.IntN(16))
		case n == 2 && p.Address&7 == 0:
			p.FirstBE, p.LastBE = 1+uint8(r.IntN(15)), 1+uint8(r.IntN(15))
		default:
			p.FirstBE = []uint8{0xf, 0xe, 0xc, 0x8}[r.IntN(4)]
			p.LastBE = []uint8{0xf, 0x7, 0x3, 0x1}[r.IntN(4)]
		}
		if k == MWr {
			p.Data = data(n)
		}
	case k.IsIO() || k.IsConfig():
		p.TC, p.Attr, p.AT, p.Length = 0, p.Attr&AttrIDO, 0, 1
		p.FirstBE = uint8(r.IntN(16))
		if k.IsIO() {
			p.Address = uint64(r.Uint32()) &^ 3
		} else {
			p.TargetID = ID(r.Uint32())
			p.Register = uint16(r.IntN(4096)) &^ 3
		}
		if k.hasPayload() {
			p.Data = data(1)
		}
	case k.IsMessage():
		p.Routing = Routing(r.IntN(6))
		p.MessageCode = uint8(r.Uint32())
		if messageNeedsTC0(p.MessageCode) {
			p.TC = 0
		}
		p.MsgDW2, p.MsgDW3 = r.Uint32(), r.Uint32()
		switch p.Routing {
		case RouteByAddress:
			p.Address = uint64(p.MsgDW2)<<32 | uint64(p.MsgDW3)
		case RouteByID:
			p.TargetID = ID(p.MsgDW2 >> 16)
		}
		if k == MsgD {
			n := 1 + r.IntN(32)
			p.Length, p.Data = uint16(n), data(n)
		} else {
			p.Length = uint16(r.IntN(1024))
		}
	case k.IsCompletion():
		p.CompleterID = ID(r.Uint32())
		p.Status = Status(r.IntN(8))
		p.BCM = r.IntN(4) == 0
		p.LowerAddress = uint8(r.IntN(128))
		if k.hasPayload() {
			n := 1 + r.IntN(64)
			if r.IntN(8) == 0 {
				n = 1 + r.IntN(1024)
			}
			minBC := max(1, 4*n-3-int(p.LowerAddress&3))
			p.ByteCount = uint16(minBC + r.IntN(4097-minBC))
			p.Length, p.Data = uint16(n), data(n)
		} else {
			p.ByteCount = uint16(1 + r.IntN(4096))
			p.Length = uint16(r.IntN(1024))
		}
	case k.IsAtomic():
		var n, size int
		switch k {
		case CAS:
			n = []int{2, 4, 8}[r.IntN(3)]
			size = 2 * n
		default:
			n = 1 + r.IntN(2)
			size = 4 * n
		}
		p.Length = uint16(n)
		p.Address = pickAddr(uint64(size), size)
		p.FirstBE, p.LastBE = uint8(r.IntN(16)), uint8(r.IntN(16))
		p.PH = uint8(r.IntN(4))
		p.Data = data(n)
	}
	return p
}

func TestRoundTripProperty(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 11))
	for i := 0; i < 20000; i++ {
		k := MRd + Kind(i%int(kindCount-MRd))
		p := randPacket(r, k)
		b, err := p.Encode()
		if err != nil {
			t.Fatalf("%d: encode %+v: %v", i, p, err)
		}
		if len(b) != p.WireLen() {
			t.Fatalf("%d: %d bytes, WireLen %d", i, len(b), p.WireLen())
		}
		v, err := Parse(b)
		if err != nil {
			t.Fatalf("%d: Parse(encode(%v)) = %v\n%x", i, p, err, b)
		}
		var q Packet
		if err := q.Decode(v); err != nil {
			t.Fatal(err)
		}
		p.ECRC = q.ECRC // computed on encode
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("%d: decode(encode(p)) differs\n p %+v\n q %+v\n%x", i, p, q, b)
		}
		// And through JSON.
		js, _ := q.MarshalJSON()
		b2, err := EncodeJSON(nil, js)
		if err != nil {
			t.Fatalf("%d: EncodeJSON(%s): %v", i, js, err)
		}
		if !bytes.Equal(b, b2) {
			t.Fatalf("%d: JSON round trip\n%s\n got %x\nwant %x", i, js, b2, b)
		}
		if v.DataCredits() != p.DataCredits() || v.Class() != p.Class() {
			t.Fatalf("%d: credits view %d packet %d", i, v.DataCredits(), p.DataCredits())
		}
	}
}

func TestEncodeRejects(t *testing.T) {
	t.Parallel()
	ok := Packet{Kind: MWr, FirstBE: 0xf, Address: 0x1000, Data: []byte{1, 2, 3, 4}}
	if _, err := ok.Encode(); err != nil {
		t.Fatalf("baseline: %v", err)
	}
	cases := []struct {
		name string
		edit func(p *Packet)
		rule string
	}{
		{"no kind", func(p *Packet) { p.Kind = KindInvalid }, RuleKindPacket},
		{"tc 8", func(p *Packet) { p.TC = 8 }, RuleFieldRange},
		{"tag 1024", func(p *Packet) { p.Tag = 1024 }, RuleFieldRange},
		{"unaligned address", func(p *Packet) { p.Address = 0x1001 }, RuleFieldRange},
		{"odd data", func(p *Packet) { p.Data = []byte{1, 2, 3} }, RuleDataLengthPacket},
		{"length vs data", func(p *Packet) { p.Length = 2 }, RuleDataLengthPacket},
		{"crosses 4 KiB", func(p *Packet) { p.Address = 0xffc; p.Data = make([]byte, 8); p.LastBE = 0xf }, RuleCross4K},
		{"last BE on length 1", func(p *Packet) { p.LastBE = 0xf }, RuleLastBELength1},
		{"data on MRd", func(p *Packet) { p.Kind = MRd; p.Length = 1 }, RuleUnexpectedData},
		{"MRd length 0", func(p *Packet) { p.Kind = MRd; p.Data = nil }, RuleFieldRange},
	}
	for _, tc := range cases {
		p := ok
		tc.edit(&p)
		prefix := []byte("keep")
		out, err := p.AppendTo(prefix)
		if RuleOf(err) != tc.rule {
			t.Errorf("%s: got %v, want rule %s", tc.name, err, tc.rule)
		}
		if string(out) != "keep" {
			t.Errorf("%s: dst changed to %x", tc.name, out)
		}
	}
}

func TestAppendToReusesBuffer(t *testing.T) {
	// Not parallel: it measures the process's allocations.
	p := Packet{Kind: MRd, Length: 1, FirstBE: 0xf, Address: 0x1000}
	buf := make([]byte, 0, 64)
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		buf, err = p.AppendTo(buf[:0])
		if err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("AppendTo into a big enough buffer allocated %.1f times", allocs)
	}
}

func TestUnmarshalJSONRejects(t *testing.T) {
	t.Parallel()
	for _, js := range []string{
		`{}`,
		`{"kind":"MRead"}`,
		`{"kind":"MRd","length":1,"first_be":15,"address":"0x100000000","fmt":0}`,
		`{"kind":"MWr","fmt":0,"data":"00000000","first_be":15}`,
		`{"kind":"CfgRd0","fmt":1}`,
		`{"kind":"Msg","type":16,"routing":2}`,
		`{"kind":"CplD","status":"XX","data":"00000000","byte_count":4}`,
		`{"kind":"CplD","data":"0g","byte_count":4}`,
		`{"kind":"MRd","length":1,"requester_id":"1:2:3"}`,
		`{"kind":"MRd","length":1,"typo":1}`,
		`{"line":3,"error":"tlp: ...","rule":"hex"}`,
		`{"kind":"MWr","truncated":true,"data":"00","first_be":15}`,
		`{"kind":"MRd","length":1,"td":true,"ecrc":"0x1"}`,
		// encoding/json's leniencies: the last of two, any case, the
		// first of two objects.
		`{"kind":"MWr","kind":"MRd","length":1,"first_be":15,"address":"0x1000"}`,
		`{"KIND":"MRd","length":1,"first_be":15,"address":"0x1000"}`,
		`{"kind":"MRd","length":1,"first_be":15,"address":"0x1000"}{"kind":"MWr"}`,
	} {
		if b, err := EncodeJSON(nil, []byte(js)); err == nil {
			t.Errorf("%s encoded to %x", js, b)
		}
	}
	// Accepted spellings: numbers as strings, hex, RRS for CRS.
	b, err := EncodeJSON(nil, []byte(`{"kind":"Cpl","status":"RRS","byte_count":4,"completer_id":"01:00.0"}`))
	if err != nil || b[6]>>5 != 2 {
		t.Errorf("RRS: %x %v", b, err)
	}
	b, err = EncodeJSON(nil, []byte(`{"kind":"MRd","length":1,"first_be":15,"address":4096}`))
	if err != nil || View(b).Address() != 4096 {
		t.Errorf("numeric address: %x %v", b, err)
	}
}
