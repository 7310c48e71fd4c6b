package nettlpside

import (
	"bytes"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/tlp"
)

// FuzzDoorbell writes an arbitrary command block to the doorbell (as the
// peer's MWr would) and then delivers an arbitrary TLP. Invariants: a
// command parses only if it re-encodes to its bytes (the reserved tail
// aside) and its refusal is one non-empty line; a refused command issues
// nothing; an accepted one issues at most Count requests, each a TLP that
// parses, from the doorbell's ID, with distinct tags; the status block
// written is DoorbellStatusLen bytes and parses back, with no more issued
// than commanded.
func FuzzDoorbell(f *testing.F) {
	read := DoorbellCommand{Op: DoorbellOpRead, Count: 4, Bytes: 64, Number: 7, Addr: 0x4000, Stride: 0x100}.AppendTo(nil)
	write := DoorbellCommand{Op: DoorbellOpWrite, Count: 64, Bytes: 256, Number: 1, Addr: 0xff00, Stride: 4}.AppendTo(nil)
	dev, host := tlp.NewID(3, 0, 0), tlp.NewID(0x7e, 0, 0)
	cp := tlp.Packet{Kind: tlp.CplD, CompleterID: host, RequesterID: dev, Tag: 2, ByteCount: 64, Data: make([]byte, 64)}
	cpl, _ := cp.AppendTo(nil)
	f.Add(read, cpl)
	f.Add(write, cpl)
	f.Add(read[:31], []byte{})
	f.Add(make([]byte, 32), cpl[:12])
	f.Fuzz(func(t *testing.T, cmd, raw []byte) {
		const addr = 0x1000
		var status []byte
		d := NewDoorbell(addr, dev, func(a uint64, b []byte) {
			if a != addr+DoorbellStatusOff {
				t.Fatalf("status written at %#x", a)
			}
			status = bytes.Clone(b)
		})
		c, perr := ParseDoorbellCommand(cmd)
		if perr != nil {
			if msg := perr.Error(); msg == "" || strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("refusal is not one line: %q", msg)
			}
		} else if re := c.AppendTo(nil); !bytes.Equal(re[:24], cmd[:24]) || len(re) != len(cmd) {
			t.Fatalf("% x parsed as %+v, which encodes as % x", cmd, c, re)
		}
		issued := 0
		if len(cmd) > 0 && len(cmd)%4 == 0 {
			last := uint8(0xf)
			if len(cmd) == 4 {
				last = 0
			}
			wp := tlp.Packet{Kind: tlp.MWr, RequesterID: host, Address: addr, FirstBE: 0xf, LastBE: last, Data: cmd}
			w, err := wp.AppendTo(nil)
			if err == nil {
				reqs, consumed := d.Take(tlp.View(w))
				if consumed || perr != nil && len(reqs) != 0 {
					t.Fatalf("command % x (%v): %d requests, consumed %v", cmd, perr, len(reqs), consumed)
				}
				if perr == nil && len(reqs) > c.Count {
					t.Fatalf("%d requests for a count of %d", len(reqs), c.Count)
				}
				tags := map[uint16]bool{}
				for _, r := range reqs {
					v, err := tlp.Parse(r)
					if err != nil || v.RequesterID() != dev || tags[v.Tag()] {
						t.Fatalf("request % x: %v, requester %v, tag %d again %v", r, err, v.RequesterID(), v.Tag(), tags[v.Tag()])
					}
					tags[v.Tag()] = true
				}
				issued = len(reqs)
			}
		}
		if v, err := tlp.Parse(raw); err == nil {
			if reqs, _ := d.Take(v); len(reqs) > DoorbellMaxCount {
				t.Fatalf("%d requests from one TLP", len(reqs))
			}
		}
		if status != nil {
			if len(status) != DoorbellStatusLen {
				t.Fatalf("status block of %d bytes", len(status))
			}
			s, err := ParseDoorbellStatus(status)
			if err != nil {
				t.Fatal(err)
			}
			if perr == nil && issued > 0 && (s.Number != c.Number || int(s.Issued) != issued) {
				t.Fatalf("status %+v after command %+v issued %d", s, c, issued)
			}
		}
		_, _ = ParseDoorbellStatus(raw)
	})
}
