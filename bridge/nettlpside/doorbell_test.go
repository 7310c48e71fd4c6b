package nettlpside

import (
	"testing"

	"github.com/dxpu/dxpu/tlp"
)

// A command written to the doorbell yields its requests, in order, from
// the device's ID with tags 0..count-1; completions of the reads are
// recorded by tag in the status block, late ones counted, and a bad
// command or a write elsewhere does nothing.
func TestDoorbell(t *testing.T) {
	dev, host := tlp.NewID(3, 0, 0), tlp.NewID(0x7e, 0, 0)
	status := map[uint64][]byte{}
	d := NewDoorbell(0x1000, dev, func(a uint64, b []byte) { status[a] = append([]byte(nil), b...) })
	write := func(addr uint64, data []byte) tlp.View {
		b, err := (&tlp.Packet{Kind: tlp.MWr, RequesterID: host, FirstBE: 0xf, LastBE: 0xf, Address: addr, Data: data}).AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		return tlp.View(b)
	}
	cmd := DoorbellCommand{Op: DoorbellOpRead, Count: 3, Bytes: 8, Number: 5, Addr: 0x40000000, Stride: 64}
	if reqs, _ := d.Take(write(0x1040, cmd.AppendTo(nil))); reqs != nil {
		t.Fatal("a write elsewhere issued requests")
	}
	bad := cmd
	bad.Count = 0
	if reqs, _ := d.Take(write(0x1000, bad.AppendTo(nil))); reqs != nil {
		t.Fatal("a command of count 0 issued requests")
	}
	reqs, consumed := d.Take(write(0x1000, cmd.AppendTo(nil)))
	if consumed || len(reqs) != 3 {
		t.Fatalf("%d requests (consumed %v), want 3", len(reqs), consumed)
	}
	for i, r := range reqs {
		v := tlp.View(r)
		if v.Kind() != tlp.MRd || v.RequesterID() != dev || v.Tag() != uint16(i) || v.Address() != 0x40000000+uint64(64*i) || v.Length() != 2 {
			t.Errorf("request %d: %v from %v tag %d at %#x length %d", i, v.Kind(), v.RequesterID(), v.Tag(), v.Address(), v.Length())
		}
	}
	cpl := func(tag uint16, st tlp.Status) tlp.View {
		data := make([]byte, 8)
		for j := range data {
			data[j] = DoorbellReadData(0x40000000 + 64*uint64(tag) + uint64(j))
		}
		if tag == 1 {
			data[3]++ // another read's data
		}
		p := tlp.Packet{Kind: tlp.CplD, CompleterID: host, RequesterID: dev, Tag: tag, ByteCount: 8, Data: data}
		if st != tlp.StatusSC {
			p = tlp.Packet{Kind: tlp.Cpl, CompleterID: host, RequesterID: dev, Tag: tag, ByteCount: 8, Status: st}
		}
		b, err := p.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		return tlp.View(b)
	}
	for _, c := range []tlp.View{cpl(0, tlp.StatusSC), cpl(1, tlp.StatusSC), cpl(2, tlp.StatusCA), cpl(2, tlp.StatusSC)} {
		if _, consumed := d.Take(c); !consumed {
			t.Fatal("a completion for the device was not consumed")
		}
	}
	s, err := ParseDoorbellStatus(status[0x1000+DoorbellStatusOff])
	if err != nil {
		t.Fatal(err)
	}
	if s.Number != 5 || s.Issued != 3 || s.Completed != 4 || s.Status[0] != 0 || s.Status[1] != DoorbellWrongData || s.Status[2] != byte(tlp.StatusCA) || s.Status[3] != DoorbellPending {
		t.Errorf("status %+v, want number 5, 3 issued, 4 completions (one late), statuses SC, wrong data, CA", s)
	}
	w := DoorbellCommand{Op: DoorbellOpWrite, Count: 2, Bytes: 4, Number: 9, Addr: 0x2000, Stride: 4}
	reqs, _ = d.Take(write(0x1000, w.AppendTo(nil)))
	if len(reqs) != 2 || tlp.View(reqs[1]).Payload()[0] != DoorbellData(9, 1, 0) {
		t.Fatalf("write command: %d requests, want 2 carrying the pattern", len(reqs))
	}
}
