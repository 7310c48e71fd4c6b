package vmm

import (
	"bytes"
	"testing"

	"github.com/dxpu/dxpu/tlp"
)

// FuzzPortReceive hands the port an arbitrary TLP from the bridge (what the
// device on the far side of the fabric sent), with a guest access pending
// or not. Invariants: no panic; only a memory write inside guest RAM
// changes guest RAM, and only the bytes it names; every TLP the port emits
// parses and is a completion to the request's requester and tag; a read
// gets no more data than it asked for; an access ends at most once.
func FuzzPortReceive(f *testing.F) {
	dev := tlp.NewID(3, 0, 0)
	add := func(op uint8, pk tlp.Packet) {
		b, err := pk.AppendTo(nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(op, b)
	}
	add(0, tlp.Packet{Kind: tlp.MRd, RequesterID: dev, Tag: 9, Address: 0x10000 + 32, Length: 64, FirstBE: 0xf, LastBE: 0xf})
	add(0, tlp.Packet{Kind: tlp.MWr, RequesterID: dev, Address: 0x10000 + 4096, FirstBE: 0xf, LastBE: 0xf, Data: bytes.Repeat([]byte{0xab}, 64)})
	add(0, tlp.Packet{Kind: tlp.MWr, RequesterID: dev, Address: 0x10000 + 8192 + 512 - 32, FirstBE: 0xf, LastBE: 0xf, Data: bytes.Repeat([]byte{0xcd}, 64)})
	add(0, tlp.Packet{Kind: tlp.MWr, RequesterID: dev, Address: 0xfee0_0000, FirstBE: 0xf, Data: []byte{1, 0, 0, 0}})
	add(1, tlp.Packet{Kind: tlp.CplD, CompleterID: dev, RequesterID: 0, Tag: 0, ByteCount: 4, Data: []byte{0xde, 0x10, 0x30, 0x23}})
	add(2, tlp.Packet{Kind: tlp.CplD, CompleterID: dev, RequesterID: 0, Tag: 0, ByteCount: 8, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}})
	add(3, tlp.Packet{Kind: tlp.Cpl, CompleterID: dev, RequesterID: 0, Tag: 0, Status: tlp.StatusUR, ByteCount: 4})
	add(0, tlp.Packet{Kind: tlp.CfgRd0, RequesterID: dev, Tag: 1, FirstBE: 0xf, Length: 1})
	f.Fuzz(func(t *testing.T, op uint8, raw []byte) {
		const ramBase, ramSize = 0x10000, 8192 + 512
		p, mem := newTestPort(t, ramSize)
		for i := range mem {
			mem[i] = byte(i*7 + 1)
		}
		before := bytes.Clone(mem)
		begin(t, p, Access{Op: CfgWrite, Addr: 0x10, Size: 4, Val: 0xfc00_0000})
		var req tlp.View
		switch op % 4 {
		case 1:
			req = tlp.View(bytes.Clone(begin(t, p, Access{Op: CfgRead, Addr: 0, Size: 4}).TLP))
		case 2:
			req = tlp.View(bytes.Clone(begin(t, p, Access{Op: BarRead, Addr: 0xfc00_0000, Size: 8}).TLP))
		case 3:
			req = tlp.View(bytes.Clone(begin(t, p, Access{Op: BarRead, Addr: 0xfc00_0102, Size: 2}).TLP))
		}
		v, err := tlp.Parse(raw)
		if err != nil {
			return // the bridge delivers only TLPs that parse
		}
		in := bytes.Clone(raw)
		got := 0
		a, _ := p.Receive(v, func(b []byte) error {
			c, err := tlp.Parse(b)
			if err != nil {
				t.Fatalf("emitted a TLP that does not parse: %v\n% x", err, b)
			}
			if !c.Kind().IsCompletion() || c.RequesterID() != v.RequesterID() || c.Tag() != v.Tag() {
				t.Fatalf("emitted %v to %v tag %#x for a %v from %v tag %#x", c.Kind(), c.RequesterID(), c.Tag(), v.Kind(), v.RequesterID(), v.Tag())
			}
			if !v.Kind().IsNonPosted() {
				t.Fatalf("answered a posted %v", v.Kind())
			}
			got += c.PayloadLen()
			return nil
		})
		if !bytes.Equal(raw, in) {
			t.Fatal("Receive changed the TLP")
		}
		if v.Kind() == tlp.MRd && got > 4*v.Length() {
			t.Fatalf("a read of %d DW got %d bytes", v.Length(), got)
		}
		if a.Done && (req == nil || !v.Kind().IsCompletion()) {
			t.Fatalf("%v ended an access (pending %v)", v.Kind(), req != nil)
		}
		lo, hi := 0, 0 // the bytes of RAM the TLP may change
		if v.Kind() == tlp.MWr && v.Address() >= ramBase && v.Address()+uint64(v.PayloadLen()) <= ramBase+ramSize {
			lo, hi = int(v.Address()-ramBase), int(v.Address()-ramBase)+v.PayloadLen()
		}
		for i := range mem {
			if mem[i] != before[i] && (i < lo || i >= hi) {
				t.Fatalf("%v at %#x changed guest RAM at %#x", v.Kind(), v.Address(), ramBase+i)
			}
		}
		if req != nil && a.Done {
			// Ended: a second copy matches nothing.
			if a2, _ := p.Receive(v, nil); a2.Done {
				t.Fatal("one access ended twice")
			}
		}
	})
}
