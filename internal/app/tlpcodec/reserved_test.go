package tlpcodec

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// TestReservedBitsRoundTrip: header bits the codec reads as reserved show
// in reserved_bits (the header's bytes, a mask), and encode sets them
// again: decode | encode gives every TLP back byte for byte.
func TestReservedBitsRoundTrip(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, hex, json, mask string }{
		{"CplD, bit 7 of byte 11 above Lower Address", "4a000001000004000100008800000000",
			`{"kind":"CplD","fmt":2,"type":10,"tc":0,"attr":0,"th":false,"td":false,"ep":false,"ln":false,"at":0,"length":1,"completer_id":"00:00.0","status":"SC","bcm":false,"byte_count":1024,"requester_id":"01:00.0","tag":0,"lower_address":8,"data":"00000000","reserved_bits":"000000000000000000000080"}`, ""},
		{"CfgRd0, DW2 bits 31:28 and 1:0", "04000001 01000a0f 0100f0ff", "", "00000000000000000000f003"},
		{"IORd, address bits 1:0", "02000001 01000a0f fedc0013", "", "000000000000000000000003"},
		{"CplD with TD: the ECRC covers the reserved bit", "4a0080010000000401000588112233443b2ee991", "", "000000000000000000000080"},
	} {
		dec, _, code := runTLPCmd(t, c.hex, "tlp", "decode")
		line := strings.TrimSuffix(dec, "\n")
		if code != 0 {
			t.Errorf("%s: decode exit %d: %s", c.name, code, dec)
			continue
		}
		if c.json != "" && line != c.json {
			t.Errorf("%s: decode\n got %s\nwant %s", c.name, line, c.json)
		}
		var o map[string]any
		if err := json.Unmarshal([]byte(line), &o); err != nil {
			t.Fatalf("%s: %v: %s", c.name, err, line)
		}
		if c.mask != "" && o["reserved_bits"] != c.mask {
			t.Errorf("%s: reserved_bits %v, want %s: %s", c.name, o["reserved_bits"], c.mask, line)
		}
		enc, errs, code := runTLPCmd(t, dec, "tlp", "encode")
		want := strings.ReplaceAll(c.hex, " ", "") + "\n"
		if code != 0 || enc != want {
			t.Errorf("%s: encode(decode(x)) = %q (exit %d, %s), want %q", c.name, enc, code, errs, want)
		}
	}
	// The JSON as a person writes it: reserved_bits first, a shorter mask
	// (the leading bytes), an all-zero mask.
	in := `{"reserved_bits":"00000000000000000000f0", "kind":"CfgRd0","requester_id":"01:00.0","first_be":15,"target_id":"01:00.0","register":252}` + "\n" +
		`{"kind":"MRd","length":1,"requester_id":"01:00.0","tag":5,"first_be":15,"address":"0xfedc0010","reserved_bits":"000000000000000000000000"}`
	enc, errs, code := runTLPCmd(t, in, "tlp", "encode")
	if want := "04000001 0100000f 0100f0fc\n000000010100050ffedc0010\n"; code != 0 || enc != strings.ReplaceAll(want, " ", "") {
		t.Errorf("encode: exit %d %q %s", code, enc, errs)
	}
}

// TestReservedBitsRefused: encode refuses a mask over a bit a field uses
// (set or not), one longer than the header, one that is not hex, and a
// given ECRC that does not cover the reserved bits; each with its line
// and the column of the value, the other lines still encoded.
func TestReservedBitsRefused(t *testing.T) {
	t.Parallel()
	cpld := `{"kind":"CplD","length":1,"completer_id":"00:00.0","byte_count":1024,"requester_id":"01:00.0","lower_address":8,"data":"00000000","reserved_bits":`
	td := `{"kind":"CplD","td":true,"length":1,"completer_id":"00:00.0","byte_count":4,"requester_id":"01:00.0","tag":5,"lower_address":8,"data":"11223344","ecrc":"0x0b2ee991","reserved_bits":"000000000000000000000080"}`
	in := strings.Join([]string{
		cpld + `"000000000000000000000001"}`, // Lower Address bit 0
		cpld + `"000000000000000000000088"}`, // bit 3 is set: 8
		cpld + `"00000000000000000000008000"}`,
		cpld + `"0x80"}`,
		cpld + `128}`,
		cpld + `"800000"}`, // Fmt[2]
		cpld + `"000000000000000000000080"}`,
		td,
	}, "\n")
	out, errs, code := runTLPCmd(t, in, "tlp", "encode")
	col := len(cpld) + 1
	for _, want := range []string{
		"dxpu tlp encode: line 1 col " + strconv.Itoa(col) + ": reserved_bits sets byte 11 bit 0, which is not reserved in CplD: it belongs to lower_address\n",
		"dxpu tlp encode: line 2 col " + strconv.Itoa(col) + ": reserved_bits sets byte 11 bit 3, which is not reserved in CplD: it belongs to lower_address\n",
		"dxpu tlp encode: line 3 col " + strconv.Itoa(col) + ": reserved_bits is 13 bytes, longer than the 12-byte header of CplD\n",
		"dxpu tlp encode: line 4 col " + strconv.Itoa(col) + `: reserved_bits "0x80" is not hex digits, two a header byte: encoding/hex: invalid byte: U+0078 'x'` + "\n",
		"dxpu tlp encode: line 5 col " + strconv.Itoa(col) + ": reserved_bits must be a string of hex digits (the header bytes' mask), found 128\n",
		"dxpu tlp encode: line 6 col " + strconv.Itoa(col) + ": reserved_bits sets byte 0 bit 7, which is not reserved in CplD: changed, the TLP does not decode (rule reserved-fmt)\n",
		"dxpu tlp encode: line 8: tlp: CplD: rule ecrc-mismatch: ecrc=187623825 (0xb2ee991): given digest 0x0b2ee991, header (with reserved_bits) and data give 0x3b2ee991\n",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	if code != 1 || strings.Count(errs, "\n") != 7 || out != "4a000001000004000100008800000000\n" {
		t.Errorf("exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
}

// TestReservedBitsPcap: `dxpu tlp decode --pcap` shows reserved_bits too,
// also for a TLP the capture cut short (the header is whole).
func TestReservedBitsPcap(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "r.pcap")
	w, err := pcapio.Create(path, pcapio.WriterOptions{LinkType: layers.LinkTypeEthernet})
	if err != nil {
		t.Fatal(err)
	}
	l2 := &encap.L2{Dst: [6]byte{2, 0, 0, 0, 0, 1}, Src: [6]byte{2, 0, 0, 0, 0, 2}}
	l3 := &encap.L3{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2")}
	cfg := mustHex(t, "04000001 01000a0f 0100f0ff")
	mrd := mustHex(t, "000000010100050ffedc0010")
	f1, err := encap.AppendDxpuEth(nil, l2, &encap.Fields{}, [][]byte{cfg, mrd})
	if err != nil {
		t.Fatal(err)
	}
	cpld := mustHex(t, "4a000004000000100100008800000000000000000000000000000000")
	f2, err := encap.AppendNetTLP(nil, l2, l3, 1, 2, cpld)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WritePacket(gopacket.CaptureInfo{}, f1); err != nil {
		t.Fatal(err)
	}
	cut := f2[:len(f2)-len(cpld)+16] // the CplD's header and 4 of its 16 data bytes
	if err := w.WritePacket(gopacket.CaptureInfo{Length: len(f2)}, cut); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out, _, code := runTLPCmd(t, "", "tlp", "decode", "--pcap", path)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != 3 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for i, want := range []string{`"truncated":false,`, `"truncated":false,`, `"truncated":true,`} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("frame TLP %d lacks %s: %s", i+1, want, lines[i])
		}
	}
	for i, want := range []string{`"reserved_bits":"00000000000000000000f003"}`, `"ph":0}`, `"reserved_bits":"000000000000000000000080"}`} {
		if !strings.HasSuffix(lines[i], want) {
			t.Errorf("frame TLP %d does not end with %s: %s", i+1, want, lines[i])
		}
	}
	if strings.Count(out, "reserved_bits") != 2 {
		t.Errorf("reserved_bits:\n%s", out)
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, ok, err := parseHexLine(s)
	if !ok || err != nil {
		t.Fatalf("hex %q: %v", s, err)
	}
	return b
}

// TestEveryHeaderBitRoundTrips sets each header bit of a TLP of every kind
// (with and without TD) that is 0: where the result still decodes, decode
// | encode gives it back exactly, and the bits that show in reserved_bits
// are the ones PCIe reserves and package tlp reads as 0: all of them, and
// no other (a flip of Fmt/Type may give another kind: only its reserved
// bits may show).
func TestEveryHeaderBitRoundTrips(t *testing.T) {
	t.Parallel()
	id := tlp.ID(0x0100)
	var bases []tlp.Packet
	for _, p := range []tlp.Packet{
		{Kind: tlp.MRd, Length: 1, FirstBE: 0xf, Address: 0x1000},
		{Kind: tlp.MRd, Addr64: true, Length: 1, FirstBE: 0xf, Address: 0x1000},
		{Kind: tlp.MRdLk, Length: 1, FirstBE: 0xf, Address: 0x1000},
		{Kind: tlp.MWr, FirstBE: 0xf, Address: 0x1000, Data: make([]byte, 4)},
		{Kind: tlp.IORd, Length: 1, FirstBE: 0xf, Address: 0x1000},
		{Kind: tlp.IOWr, FirstBE: 0xf, Address: 0x1000, Data: make([]byte, 4)},
		{Kind: tlp.CfgRd0, Length: 1, FirstBE: 0xf, TargetID: id},
		{Kind: tlp.CfgWr0, FirstBE: 0xf, TargetID: id, Data: make([]byte, 4)},
		{Kind: tlp.CfgRd1, Length: 1, FirstBE: 0xf, TargetID: id},
		{Kind: tlp.CfgWr1, FirstBE: 0xf, TargetID: id, Data: make([]byte, 4)},
		{Kind: tlp.Msg, MessageCode: 0x7e, Routing: tlp.RouteByID, TargetID: id},
		{Kind: tlp.Msg, MessageCode: 0x7e, Routing: tlp.RouteByAddress, Address: 0x1000},
		{Kind: tlp.Msg, MessageCode: 0x7e, Routing: 4},
		{Kind: tlp.MsgD, MessageCode: 0x7f, Routing: 4, Data: make([]byte, 4)},
		{Kind: tlp.Cpl, ByteCount: 4},
		{Kind: tlp.CplLk, ByteCount: 4},
		{Kind: tlp.CplD, ByteCount: 4, Data: make([]byte, 4)},
		{Kind: tlp.CplDLk, ByteCount: 4, Data: make([]byte, 4)},
		{Kind: tlp.FetchAdd, FirstBE: 0xf, Address: 0x1000, Data: make([]byte, 4)},
		{Kind: tlp.Swap, FirstBE: 0xf, Address: 0x1000, Data: make([]byte, 4)},
		{Kind: tlp.CAS, FirstBE: 0xf, Address: 0x1000, Data: make([]byte, 8)},
	} {
		p.RequesterID = id
		bases = append(bases, p)
		p.TD = true
		bases = append(bases, p)
	}
	// Byte and mask of the reserved bits by kind.
	reserved := func(k tlp.Kind) map[int]byte {
		switch {
		case k.IsIO():
			return map[int]byte{11: 0x03}
		case k.IsConfig():
			return map[int]byte{10: 0xf0, 11: 0x03}
		case k.IsCompletion():
			return map[int]byte{11: 0x80}
		}
		return nil
	}
	for _, p := range bases {
		enc, err := p.Encode()
		if err != nil {
			t.Fatalf("%v: %v", p, err)
		}
		hl := tlp.View(enc).HeaderLen()
		var in strings.Builder
		for i := range hl {
			for bit := range 8 {
				if enc[i]&(1<<bit) != 0 {
					continue
				}
				b := bytes.Clone(enc)
				b[i] |= 1 << bit
				fixECRC(b)
				fmt.Fprintf(&in, "%x\n", b)
			}
		}
		var dec strings.Builder
		Decode(nil, "", strings.NewReader(in.String()), &dec) // some bits break rules
		var ok strings.Builder
		got := map[int]byte{}
		for l := range strings.SplitSeq(strings.TrimSuffix(dec.String(), "\n"), "\n") {
			if strings.Contains(l, `"error"`) {
				continue
			}
			ok.WriteString(l + "\n")
			var o struct {
				Kind     string `json:"kind"`
				Reserved string `json:"reserved_bits"`
			}
			if err := json.Unmarshal([]byte(l), &o); err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			m, _ := hex.DecodeString(o.Reserved)
			k, _ := tlp.ParseKind(o.Kind)
			for i, c := range m {
				if c&^reserved(k)[i] != 0 {
					t.Errorf("%s: %#02x of byte %d is not reserved in %s", l, c, i, o.Kind)
				}
				if k == p.Kind {
					got[i] |= c
				}
			}
		}
		var hexes, errs strings.Builder
		if err := Encode(strings.NewReader(ok.String()), &hexes, &errs); err != nil {
			t.Fatalf("%v: encode: %v\n%s", p.Kind, err, errs.String())
		}
		// Every TLP that decoded comes back, in order.
		var back strings.Builder
		for l := range strings.SplitSeq(in.String(), "\n") {
			if l != "" && decodes(l) {
				back.WriteString(l + "\n")
			}
		}
		if g, w := strings.Split(hexes.String(), "\n"), strings.Split(back.String(), "\n"); !slices.Equal(g, w) {
			i := 0
			for i < min(len(g), len(w))-1 && g[i] == w[i] {
				i++
			}
			t.Errorf("%v td=%v: decode | encode gives %s for %s (%d lines for %d)", p.Kind, p.TD, g[i], w[i], len(g), len(w))
		}
		if strings.Count(back.String(), "\n") < 8 {
			t.Errorf("%v td=%v: only %d of the TLPs decode:\n%s", p.Kind, p.TD, strings.Count(back.String(), "\n"), dec.String())
		}
		want := reserved(p.Kind)
		for i := range hl {
			if got[i] != want[i] {
				t.Errorf("%v td=%v: reserved_bits of byte %d: %#02x, want %#02x", p.Kind, p.TD, i, got[i], want[i])
			}
		}
	}
}

func decodes(h string) bool {
	b, _ := hex.DecodeString(h)
	_, err := tlp.Parse(b)
	return err == nil
}
