package docs

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/internal/app/conform"
	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
)

var update = flag.Bool("update", false, "rewrite the worked examples in protocol.md from the code")

const specFile = "protocol.md"

// examples builds every worked example of protocol.md from the code.
func examples() (map[string][]byte, error) {
	mrd := tlp.Packet{Kind: tlp.MRd, Length: 1, RequesterID: tlp.NewID(1, 0, 0), Tag: 5, FirstBE: 0xf, Address: 0xf0001000}
	mrdB, err := mrd.AppendTo(nil)
	if err != nil {
		return nil, fmt.Errorf("tlp-mrd: %w", err)
	}
	cpl := tlp.Packet{Kind: tlp.CplD, CompleterID: tlp.NewID(3, 0, 0), RequesterID: tlp.NewID(1, 0, 0), Tag: 5,
		ByteCount: 4, Data: []byte{0x11, 0x22, 0x33, 0x44}}
	cplB, err := cpl.AppendTo(nil)
	if err != nil {
		return nil, fmt.Errorf("tlp-cpld: %w", err)
	}
	host := [6]byte{2, 0, 0, 0, 0, 1}
	gpu := [6]byte{2, 0, 0, 0, 0, 2}
	l2 := encap.L2{Dst: gpu, Src: host}
	f := encap.Fields{Type: encap.MsgTLP, Flags: encap.FlagAck | encap.FlagCredit, PairID: 42, Seq: 7, Ack: 3,
		Infinite: 1<<encap.CreditCplH | 1<<encap.CreditCplD}
	f.Limits[encap.CreditPH], f.Limits[encap.CreditNPH] = 32, 16
	f.Limits[encap.CreditPD], f.Limits[encap.CreditNPD] = 256, 16
	out := map[string][]byte{"tlp-mrd": mrdB, "tlp-cpld": cplB}
	add := func(name string, b []byte, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		out[name] = b
		return nil
	}
	eth, err := encap.AppendDxpuEth(nil, &l2, &f, [][]byte{mrdB})
	if err := add("eth-tlp", eth, err); err != nil {
		return nil, err
	}
	tagged := l2
	tagged.Tagged, tagged.VLAN, tagged.PCP = true, 100, 3
	vlan, err := encap.AppendDxpuEth(nil, &tagged, &f, [][]byte{mrdB})
	if err := add("eth-vlan-tlp", vlan, err); err != nil {
		return nil, err
	}
	l3 := encap.L3{Src: netip.MustParseAddr("192.168.10.1"), Dst: netip.MustParseAddr("192.168.10.3")}
	udp, err := encap.AppendDxpuUDP(nil, &l2, &l3, &f, [][]byte{mrdB})
	if err := add("udp-tlp", udp, err); err != nil {
		return nil, err
	}

	nak := encap.Fields{Type: encap.MsgNak, Flags: encap.FlagAck | encap.FlagCredit | encap.FlagSack, PairID: 0x123456,
		Seq: 0x113c39fc, Ack: 0xa07bd747, Sack: 1}
	nak.Limits = [encap.NumCreditTypes]uint32{encap.CreditPH: 67, encap.CreditPD: 2051, encap.CreditNPH: 64,
		encap.CreditNPD: 2048, encap.CreditCplH: 64, encap.CreditCplD: 2048}
	back := encap.L2{Dst: host, Src: gpu}
	nakB, err := encap.AppendDxpuMsg(nil, &back, nil, &nak, nil)
	if err := add("eth-nak", nakB, err); err != nil {
		return nil, err
	}

	// The remaining examples are UDP payloads: the dxpu header on. An
	// Ethernet frame without tags has the header at byte 14.
	payload := func(name string, f *encap.Fields, body []byte) error {
		b, err := encap.AppendDxpuMsg(nil, &l2, nil, f, body)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		out[name] = b[encap.EthHeaderLen : encap.EthHeaderLen+encap.HeaderLen+len(body)]
		return nil
	}
	cr := encap.Fields{Type: encap.MsgCredit, Flags: encap.FlagAck | encap.FlagCredit, PairID: 42, Seq: 9, Ack: 0x100,
		Infinite: 1<<encap.CreditCplH | 1<<encap.CreditCplD}
	cr.Limits[encap.CreditPH], cr.Limits[encap.CreditNPH] = 80, 64
	cr.Limits[encap.CreditPD], cr.Limits[encap.CreditNPD] = 4096, 1024
	if err := payload("credit", &cr, nil); err != nil {
		return nil, err
	}
	hello := encap.Control{Type: encap.CtlHello, Role: encap.RoleHost, TagBits: 10, Session: 0x0a0b0c0d,
		Window: 256, MaxTLP: 4116, ISN: 0x11223344, Infinite: 1<<encap.CreditCplH | 1<<encap.CreditCplD}
	hello.Credits[encap.CreditPH], hello.Credits[encap.CreditNPH] = 64, 32
	hello.Credits[encap.CreditPD], hello.Credits[encap.CreditNPD] = 1024, 64
	if err := payload("hello", &encap.Fields{Type: encap.MsgControl, PairID: 42, Seq: hello.ISN}, hello.AppendTo(nil)); err != nil {
		return nil, err
	}
	// The same HELLO on a keyed pair (key nonce 40 41 ... 4f after it),
	// sealed under the handshake key: pair key 00 01 ... 1f, generation 1,
	// GCM, boot ID b0 07 1d 2c 3b 4a 59 68, clock 0x0102030405 (KEY-5).
	keyedHello := hello.AppendTo(nil)
	for i := range 16 {
		keyedHello = append(keyedHello, 0x40+byte(i))
	}
	if err := payload("keyed-hello", &encap.Fields{Type: encap.MsgControl, PairID: 42, Seq: hello.ISN}, keyedHello); err != nil {
		return nil, err
	}
	pairKey := make([]byte, seal.KeyLen)
	for i := range pairKey {
		pairKey[i] = byte(i)
	}
	boot := bytes.NewReader([]byte{0xb0, 0x07, 0x1d, 0x2c, 0x3b, 0x4a, 0x59, 0x68})
	ch, err := seal.New(seal.Config{PairID: 42, Role: encap.RoleHost, Mode: seal.ModeGCM, Rand: boot}, 1, pairKey)
	if err != nil {
		return nil, fmt.Errorf("sealed-hello: %w", err)
	}
	sealed, err := ch.SealHandshake(nil, out["keyed-hello"], 0x0102030405)
	if err := add("sealed-hello", sealed, err); err != nil {
		return nil, err
	}
	delete(out, "keyed-hello")
	ka := encap.Control{Type: encap.CtlKeepalive, Role: encap.RoleGPU, Probe: 3, Session: 0x01020304, PeerSession: 0x0a0b0c0d}
	kaF := encap.Fields{Type: encap.MsgControl, Flags: encap.FlagAck | encap.FlagCredit, PairID: 42, Ack: 0x11223350, Infinite: 0x3f}
	if err := payload("keepalive", &kaF, ka.AppendTo(nil)); err != nil {
		return nil, err
	}
	rst := encap.Control{Type: encap.CtlReset, Role: encap.RoleHost, Reason: encap.ResetLinkDown, Session: 0x0a0b0c0d, PeerSession: 0x01020304}
	if err := payload("reset", &encap.Fields{Type: encap.MsgControl, PairID: 42}, rst.AppendTo(nil)); err != nil {
		return nil, err
	}
	return out, nil
}

// hexBlock renders b as the document shows it: 16 bytes a line.
func hexBlock(b []byte) string {
	var s strings.Builder
	for i := 0; i < len(b); i += 16 {
		line := b[i:min(i+16, len(b))]
		for j, c := range line {
			if j > 0 {
				s.WriteByte(' ')
			}
			fmt.Fprintf(&s, "%02x", c)
		}
		s.WriteByte('\n')
	}
	return s.String()
}

var exampleRE = regexp.MustCompile("(?m)^<!-- example: ([a-z0-9-]+) -->\n```hex\n((?:[^`]*\n)?)```")

// TestExamples compares every worked example with the bytes the code
// builds; with -update it rewrites them.
func TestExamples(t *testing.T) {
	doc, err := os.ReadFile(specFile)
	if err != nil {
		t.Fatal(err)
	}
	want, err := examples()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var fixed bytes.Buffer
	last := 0
	for _, m := range exampleRE.FindAllSubmatchIndex(doc, -1) {
		name := string(doc[m[2]:m[3]])
		block := string(doc[m[4]:m[5]])
		if seen[name] {
			t.Errorf("example %q appears twice", name)
		}
		seen[name] = true
		b, ok := want[name]
		if !ok {
			t.Errorf("example %q: no generator for it in examples()", name)
			continue
		}
		got, err := hex.DecodeString(strings.Join(strings.Fields(block), ""))
		if err != nil {
			t.Errorf("example %q: bad hex: %v", name, err)
		}
		if !bytes.Equal(got, b) && !*update {
			t.Errorf("example %q drifted from the code:\ndocument:\n%scode:\n%s(go test ./docs -update rewrites it)", name, block, hexBlock(b))
		}
		fixed.Write(doc[last:m[4]])
		fixed.WriteString(hexBlock(b))
		last = m[5]
	}
	fixed.Write(doc[last:])
	for name := range want {
		if !seen[name] {
			t.Errorf("example %q is generated but has no <!-- example: %s --> block in %s", name, name, specFile)
		}
	}
	if *update && !bytes.Equal(fixed.Bytes(), doc) {
		if err := os.WriteFile(specFile, fixed.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the examples in %s", specFile)
	}
}

// Examples parse back: the framing ones with encap.ParseFrame, so a
// generator cannot produce bytes the protocol rejects.
func TestExamplesParse(t *testing.T) {
	ex, err := examples()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"eth-tlp", "eth-vlan-tlp", "udp-tlp", "eth-nak"} {
		f, err := encap.ParseFrame(ex[name], &encap.Config{RejectTruncated: true})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if f.Encap() != encap.EncapDxpuEth && f.Encap() != encap.EncapDxpuUDP {
			t.Errorf("%s: parsed as %v", name, f.Encap())
		}
	}
	for _, name := range []string{"hello", "keepalive", "reset"} {
		h, trunc, err := encap.ParseHeader(ex[name])
		if err != nil || trunc {
			t.Errorf("%s: header: %v (truncated %v)", name, err, trunc)
			continue
		}
		if _, err := encap.ParseControl(h.Body()); err != nil {
			t.Errorf("%s: control: %v", name, err)
		}
	}
}

// ruleDefRE matches a rule definition: a list item starting with the bold
// identifier.
var (
	ruleDefRE = regexp.MustCompile(`(?m)^- \*\*([A-Z]{3}-[0-9]+)\*\*`)
	ruleRefRE = regexp.MustCompile(`\b([A-Z]{3}-[0-9]+)\b`)
)

func definedRules(t *testing.T) map[string]int {
	t.Helper()
	doc, err := os.ReadFile(specFile)
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]int{}
	for _, m := range ruleDefRE.FindAllSubmatch(doc, -1) {
		defs[string(m[1])]++
	}
	if len(defs) == 0 {
		t.Fatalf("%s defines no rules (want list items like - **FRM-1** ...)", specFile)
	}
	return defs
}

// TestRuleIDsUnique: each identifier is defined once, and every identifier
// the text refers to is defined.
func TestRuleIDsUnique(t *testing.T) {
	t.Parallel()
	defs := definedRules(t)
	for id, n := range defs {
		if n > 1 {
			t.Errorf("rule %s is defined %d times", id, n)
		}
	}
	doc, _ := os.ReadFile(specFile)
	for _, m := range ruleRefRE.FindAllSubmatch(doc, -1) {
		if id := string(m[1]); defs[id] == 0 {
			t.Errorf("%s refers to rule %s, which it does not define", specFile, id)
		}
	}
}

// TestKitCitesDefinedRules: the conformance kit judges only rules the
// specification defines, and names each once.
func TestKitCitesDefinedRules(t *testing.T) {
	t.Parallel()
	defs := definedRules(t)
	rules := conform.Rules()
	if len(rules) == 0 {
		t.Fatal("the kit cites no rules")
	}
	var ids []string
	for _, r := range rules {
		if defs[r.ID] == 0 {
			t.Errorf("the kit cites %s (%s), which %s does not define", r.ID, r.Summary, specFile)
		}
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	if c := slices.Compact(slices.Clone(ids)); len(c) != len(ids) {
		t.Errorf("the kit lists a rule twice: %v", ids)
	}
}

// TestKitListsEveryRule: the kit's report has a line for every rule the
// specification defines (judged, or n/a with the reason). KEY-2 to KEY-8
// come with the kit's keyed mode, on its own branch.
func TestKitListsEveryRule(t *testing.T) {
	t.Parallel()
	pending := map[string]bool{"KEY-2": true, "KEY-3": true, "KEY-4": true, "KEY-5": true, "KEY-6": true, "KEY-7": true, "KEY-8": true}
	listed := map[string]bool{}
	for _, r := range conform.Rules() {
		listed[r.ID] = true
	}
	for id := range definedRules(t) {
		if !listed[id] && !pending[id] {
			t.Errorf("%s defines %s, the kit's report does not list it", specFile, id)
		}
	}
}

// TestHelloExamplesFollowFRM11: the worked HELLOs carry their ISN in Seq
// (header bytes 8..11), as FRM-11 requires and the kit checks; both had
// Seq 0, which a second implementation written from the examples copied.
func TestHelloExamplesFollowFRM11(t *testing.T) {
	ex, err := examples()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"hello", "sealed-hello"} {
		if b := ex[name]; len(b) < 12 || binary.BigEndian.Uint32(b[8:12]) != 0x11223344 {
			t.Errorf("example %q: Seq %x, want its ISN 11223344 (FRM-11)", name, b[8:min(12, len(b))])
		}
	}
}
