package nettlp

import (
	"bytes"
	"fmt"

	"github.com/dxpu/dxpu/tlp"
)

// checkReadCompletions verifies the completions a Completer emitted for
// the memory read req (TLP bytes, no NetTLP header) against the PCIe
// completion rules, the libtlp-compatibility rules, and mem's content.
// cpls hold TLPs without headroom.
func checkReadCompletions(cfg CompleterConfig, req []byte, cpls [][]byte, mem Memory) error {
	r, err := decodeRequest(req)
	if err != nil {
		return fmt.Errorf("request does not decode: %v", err)
	}
	if len(cpls) == 0 {
		return fmt.Errorf("no completion")
	}
	for i, c := range cpls {
		v, err := tlp.Parse(c)
		if err != nil {
			return fmt.Errorf("completion %d malformed: %v (% x)", i, err, c)
		}
		if v.RequesterID() != r.v.RequesterID() || v.Tag() != r.v.Tag() {
			return fmt.Errorf("completion %d: requester %v tag %#x, request has %v %#x", i, v.RequesterID(), v.Tag(), r.v.RequesterID(), r.v.Tag())
		}
		if v.CompleterID() != cfg.CompleterID {
			return fmt.Errorf("completion %d: completer %v, want %v", i, v.CompleterID(), cfg.CompleterID)
		}
		if v.TC() != r.v.TC() || v.Attr() != r.v.Attr() {
			return fmt.Errorf("completion %d: TC %d Attr %d, request TC %d Attr %d", i, v.TC(), v.Attr(), r.v.TC(), r.v.Attr())
		}
	}
	first := tlp.View(cpls[0])
	if first.Status() != tlp.StatusSC {
		if len(cpls) != 1 || first.Kind() == tlp.CplD {
			return fmt.Errorf("UR answered with %d completions, kind %v", len(cpls), first.Kind())
		}
		return nil
	}
	span := 4 * r.lengthDW
	fits := span <= cfg.MPS && span < 4096
	if fits && len(cpls) != 1 {
		return fmt.Errorf("read of span %d <= MPS %d answered by %d CplDs, want 1", span, cfg.MPS, len(cpls))
	}
	var got []byte
	pos := r.dwAddr
	remaining := r.count
	for i, c := range cpls {
		v := tlp.View(c)
		if v.Kind() != tlp.CplD && v.Kind() != tlp.CplDLk {
			return fmt.Errorf("completion %d is %v", i, v.Kind())
		}
		if v.Status() != tlp.StatusSC {
			return fmt.Errorf("completion %d status %v after an SC", i, v.Status())
		}
		n := v.PayloadLen()
		if n > cfg.MPS {
			return fmt.Errorf("completion %d carries %d bytes > MPS %d", i, n, cfg.MPS)
		}
		firstByte := max(pos, r.addr)
		if want := uint8(firstByte & 0x7f); v.LowerAddress() != want {
			return fmt.Errorf("completion %d: Lower Address %#x, want %#x", i, v.LowerAddress(), want)
		}
		if v.ByteCount() != remaining {
			return fmt.Errorf("completion %d: Byte Count %d, want %d", i, v.ByteCount(), remaining)
		}
		if i > 0 && pos%uint64(cfg.RCB) != 0 {
			return fmt.Errorf("completion %d starts at %#x, not on RCB %d", i, pos, cfg.RCB)
		}
		last := i == len(cpls)-1
		end := pos + uint64(n)
		if !last && end%uint64(cfg.RCB) != 0 {
			return fmt.Errorf("completion %d ends at %#x, not on RCB %d", i, end, cfg.RCB)
		}
		// libtlp's test: last exactly when Length covers (LA & 3) + Byte Count.
		a := int(v.LowerAddress() & 3)
		if isLast := int(v.LengthField()) == (a+int(v.ByteCountField())+3)>>2; isLast != last {
			return fmt.Errorf("completion %d of %d: libtlp's last-completion test says %v", i, len(cpls), isLast)
		}
		got = append(got, v.Payload()...)
		remaining -= int(end - firstByte)
		pos = end
	}
	if remaining > 0 || pos != r.dwAddr+uint64(span) {
		return fmt.Errorf("completions end at %#x with %d bytes due; request ends at %#x", pos, remaining, r.dwAddr+uint64(span))
	}
	if r.lengthDW == 1 && r.firstBE == 0 {
		return nil
	}
	want := make([]byte, r.count)
	if err := mem.ReadAt(want, r.addr); err != nil {
		return fmt.Errorf("memory: %v", err)
	}
	lead := int(r.addr - r.dwAddr)
	if !bytes.Equal(got[lead:lead+r.count], want) {
		return fmt.Errorf("data differs from memory")
	}
	return nil
}
