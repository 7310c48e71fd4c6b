package tlpcodec

import (
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// TestReservedBitsWithECRC: a given ECRC is checked as package tlp checks
// it whatever the mask: with an all-zero mask over the plain TLP (right:
// encoded; wrong: refused), with bits set as a 32-bit number over the
// header with them; without TD it is ignored, as package tlp ignores it.
// A mask over a field of a TLP with TD names the field, not the digest.
func TestReservedBitsWithECRC(t *testing.T) {
	t.Parallel()
	td := `{"kind":"CplD","td":true,"length":1,"completer_id":"00:00.0","byte_count":4,"requester_id":"01:00.0","tag":5,"lower_address":8,"data":"11223344",`
	plain := strings.Replace(td, `"td":true,`, "", 1)
	in := strings.Join([]string{
		td + `"ecrc":"0xa99e0f20","reserved_bits":"000000000000000000000000"}`,
		td + `"ecrc":"0x12345678","reserved_bits":"000000000000000000000000"}`,
		td + `"ecrc":"0x13b2ee991","reserved_bits":"000000000000000000000080"}`, // 0x3b2ee991 and a 33rd bit
		plain + `"ecrc":"0x12345678","reserved_bits":"000000000000000000000080"}`,
		td + `"reserved_bits":"000000000000000000000001"}`,
	}, "\n")
	out, errs, code := runTLPCmd(t, in, "tlp", "encode")
	if want := "4a008001000000040100050811223344a99e0f20\n4a000001000000040100058811223344\n"; out != want {
		t.Errorf("stdout %q, want %q (lines 1 and 4)\nstderr:\n%s", out, want, errs)
	}
	for _, want := range []string{
		"dxpu tlp encode: line 2: tlp: CplD: rule ecrc-mismatch: ecrc=305419896 (0x12345678): given digest 0x12345678, header and data give 0xa99e0f20\n",
		`dxpu tlp encode: line 3: tlp: json ecrc: "0x13b2ee991" is not a 32-bit number: field out of range` + "\n",
		"dxpu tlp encode: line 5 col 162: reserved_bits sets byte 11 bit 0, which is not reserved in CplD: it belongs to lower_address\n",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	if code != 1 || strings.Count(errs, "\n") != 3 {
		t.Errorf("exit %d, stderr:\n%s", code, errs)
	}
}

// TestReservedBitsPcapLargestPayload: a capture cut short shows the
// reserved bits of a TLP with the largest payload (Length 0: 1024 DW,
// 4096 bytes) too.
func TestReservedBitsPcapLargestPayload(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "max.pcap")
	w, err := pcapio.Create(path, pcapio.WriterOptions{LinkType: layers.LinkTypeEthernet})
	if err != nil {
		t.Fatal(err)
	}
	l2 := &encap.L2{Dst: [6]byte{2, 0, 0, 0, 0, 1}, Src: [6]byte{2, 0, 0, 0, 0, 2}}
	l3 := &encap.L3{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2")}
	// CplD, Length 0, Byte Count 0 (4096), Lower Address 8 and bit 7.
	cpld := append(mustHex(t, "4a000000 00000000 01000088"), make([]byte, 4096)...)
	f, err := encap.AppendNetTLP(nil, l2, l3, 1, 2, cpld)
	if err != nil {
		t.Fatal(err)
	}
	cut := f[:len(f)-len(cpld)+12+16] // the header and 16 of the 4096 data bytes
	if err := w.WritePacket(gopacket.CaptureInfo{Length: len(f)}, cut); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out, _, code := runTLPCmd(t, "", "tlp", "decode", "--pcap", path)
	line := strings.TrimSuffix(out, "\n")
	if code != 0 || strings.Contains(line, "\n") || !strings.Contains(line, `"truncated":true,`) || !strings.Contains(line, `"length":1024,`) {
		t.Fatalf("exit %d, want one truncated CplD of 1024 DW:\n%s", code, out)
	}
	if !strings.HasSuffix(line, `"reserved_bits":"000000000000000000000080"}`) {
		t.Errorf("the cut 4096-byte CplD does not end with its reserved_bits: %s", line)
	}
}
