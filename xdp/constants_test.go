package xdp

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/tlp/encap"
)

// The C sources of the XDP program, as bpf2go compiles them.
var cSources = []string{"switch.c", "bpf_minimal.h"}

// readC returns a C source with its comments blanked out, so that numbers
// in comments are not taken for code.
func readC(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatalf("reading the XDP program's source: %v", err)
	}
	return regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`).ReplaceAllString(string(b), " ")
}

// cNumber parses a C integer literal (decimal or hex, U/L suffixes).
func cNumber(s string) (int64, bool) {
	v, err := strconv.ParseInt(strings.TrimRight(s, "uUlL"), 0, 64)
	return v, err == nil
}

// TestCDefinesMatchGo pins every #define of the XDP program to the Go
// constant it must equal. A #define this test does not know fails it: a
// new one must be named here (with its Go counterpart, or as one that has
// none), so the C and Go sides cannot drift apart.
func TestCDefinesMatchGo(t *testing.T) {
	t.Parallel()
	want := map[string]int64{
		// The frame format: package encap.
		"ETH_HLEN":         encap.EthHeaderLen,
		"VLAN_HLEN":        encap.VLANTagLen,
		"ETH_P_8021Q":      encap.EtherTypeVLAN,
		"ETH_P_IP":         encap.EtherTypeIPv4,
		"ETH_P_DXPU":       encap.EtherType,
		"DXPU_HLEN":        encap.HeaderLen,
		"DXPU_VERSION":     encap.Version,
		"DXPU_MSG_CONTROL": int64(encap.MsgControl),
		"IPPROTO_UDP":      encap.IPProtoUDP,
		// The maps: the loader.
		"MAX_PORTS":  MaxPorts,
		"XSK_QUEUES": XSKQueues,
		"PAIR_LANES": pairLanes,
	}
	noGo := map[string]bool{
		"LINEAR_MIN":         true, // a length test inside the program
		"BPF_F_MMAPABLE":     true, // kernel ABI (cilium/ebpf sets map flags itself)
		"BPF_ANY":            true, // kernel ABI
		"DXPU_BPF_MINIMAL_H": true, // include guard
		"__always_inline":    true, // compiler attribute
	}
	define := regexp.MustCompile(`(?m)^[ \t]*#define[ \t]+([A-Za-z_][A-Za-z0-9_]*)(\(?)(?:[ \t]*([^\n]*))?$`)
	seen := map[string]bool{}
	for _, src := range cSources {
		for _, m := range define.FindAllStringSubmatch(readC(t, src), -1) {
			name, val := m[1], strings.TrimSpace(m[3])
			if m[2] != "" {
				continue // a function-like macro (SEC, bpf_htons, ...)
			}
			seen[name] = true
			w, known := want[name]
			switch {
			case noGo[name]:
			case !known:
				t.Errorf("%s: #define %s %s has no Go counterpart in this test: add it", src, name, val)
			default:
				v, ok := cNumber(val)
				if !ok || v != w {
					t.Errorf("%s: #define %s %s, Go says %d (%#x)", src, name, val, w, w)
				}
			}
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("#define %s is gone from the XDP program: drop it here", name)
		}
	}
}

// cEnum returns the members of the C enum whose body follows open, with
// their values (implicit ones counted on from the previous).
func cEnum(t *testing.T, src, open string) (names []string, values map[string]int64) {
	t.Helper()
	i := strings.Index(src, open)
	if i < 0 {
		t.Fatalf("no %q in the XDP program", open)
	}
	body := src[i+len(open):]
	body = body[:strings.Index(body, "}")]
	values = map[string]int64{}
	next := int64(0)
	for _, item := range strings.Split(body, ",") {
		name, val, explicit := strings.Cut(strings.TrimSpace(item), "=")
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if explicit {
			v, ok := cNumber(strings.TrimSpace(val))
			if !ok {
				t.Fatalf("%s: value %q is not a number", name, val)
			}
			next = v
		}
		names, values[name] = append(names, name), next
		next++
	}
	return names, values
}

// TestCEnumsMatchGo: enum reason is switching.Reason (same values, same
// names as the metric labels) and enum xdp_action the XDP* codes.
func TestCEnumsMatchGo(t *testing.T) {
	t.Parallel()
	names, vals := cEnum(t, readC(t, "switch.c"), "enum reason {")
	for _, n := range names {
		v := vals[n]
		if n == "REASON_MAX" {
			if v != int64(switching.NumReasons) {
				t.Errorf("REASON_MAX = %d, switching.NumReasons = %d", v, switching.NumReasons)
			}
			continue
		}
		if label := strings.ToLower(strings.TrimPrefix(n, "REASON_")); v < 0 || v >= int64(switching.NumReasons) || switching.Reason(v).String() != label {
			t.Errorf("%s = %d, but switching.Reason(%d) is %q", n, v, v, switching.Reason(v))
		}
	}
	if len(names) != int(switching.NumReasons)+1 {
		t.Errorf("enum reason has %d members, switching has %d reasons and NumReasons", len(names), switching.NumReasons)
	}
	_, acts := cEnum(t, readC(t, "bpf_minimal.h"), "enum xdp_action {")
	for name, w := range map[string]int64{"XDP_ABORTED": switching.XDPAborted, "XDP_DROP": switching.XDPDrop,
		"XDP_PASS": switching.XDPPass, "XDP_TX": switching.XDPTx, "XDP_REDIRECT": switching.XDPRedirect} {
		if v, ok := acts[name]; !ok || v != w {
			t.Errorf("%s = %d (present %v), switching says %d", name, v, ok, w)
		}
	}
}

// TestCUDPPortMatchesGo: the program's default dxpu port, stored in
// network order, is encap.DefaultUDPPort.
func TestCUDPPortMatchesGo(t *testing.T) {
	t.Parallel()
	m := regexp.MustCompile(`__be16 dxpu_udp_port = (0x[0-9a-fA-F]+|[0-9]+);`).FindStringSubmatch(readC(t, "switch.c"))
	if m == nil {
		t.Fatal("switch.c: no initialised dxpu_udp_port")
	}
	v, _ := cNumber(m[1])
	if wire := uint16(v)>>8 | uint16(v)<<8; wire != encap.DefaultUDPPort {
		t.Errorf("dxpu_udp_port = %s, %d on the wire; encap.DefaultUDPPort = %d", m[1], wire, encap.DefaultUDPPort)
	}
}

// TestCOffsetsMatchGo pins each constant offset at which switch.c reads a
// header (data + 12, ip[9], udp + 6, h[1], ...) and each bit mask it
// applies to the encap view constants. An offset or mask this test does
// not know fails it.
func TestCOffsetsMatchGo(t *testing.T) {
	t.Parallel()
	offsets := map[string]int64{
		"data + 6":  encap.EthSrcOffset,
		"data + 12": encap.EthTypeOffset,
		"data + 16": encap.EthTypeOffset + encap.VLANTagLen, // the EtherType behind one tag
		"data[12]":  encap.EthTypeOffset + encap.VLANTPIDOffset,
		"data[13]":  encap.EthTypeOffset + encap.VLANTPIDOffset + 1,
		"data[14]":  encap.EthTypeOffset + encap.VLANTCIOffset,
		"data[15]":  encap.EthTypeOffset + encap.VLANTCIOffset + 1,
		"ip[0]":     encap.IPv4VersionIHLOffset,
		"ip + 6":    encap.IPv4FlagsFragOffset,
		"ip[9]":     encap.IPv4ProtocolOffset,
		"ip + 10":   encap.IPv4ChecksumOffset,
		"ip + 12":   encap.IPv4SrcOffset,
		"ip + 16":   encap.IPv4DstOffset,
		"ip + 20":   encap.IPv4HeaderLen,                          // UDP behind a header without options
		"ip + 22":   encap.IPv4HeaderLen + encap.UDPDstPortOffset, // its destination port
		"ip + 28":   encap.IPv4HeaderLen + encap.UDPHeaderLen,     // the dxpu header behind it
		"udp + 2":   encap.UDPDstPortOffset,
		"udp + 6":   encap.UDPChecksumOffset,
		"udp + 8":   encap.UDPHeaderLen,
		"h[0]":      encap.HeaderVersionFlagsOffset,
		"h[1]":      encap.HeaderTypeOffset,
		"h[2]":      encap.HeaderPairIDOffset,
		"h[3]":      encap.HeaderPairIDOffset + 1,
		"h[4]":      encap.HeaderPairIDOffset + 2,
	}
	masks := map[string]int64{
		"0x45":   encap.IPv4Version<<4 | encap.IPv4HeaderLen/4, // version 4, IHL 5
		"0x3fff": encap.IPv4FlagMF | encap.IPv4FragOffsetMask,  // any fragment
		"0x0f":   encap.IPv4IHLMask,                            // IHL nibble
		"0xf0":   int64(^uint16(encap.VLANVIDMask) >> 8),       // PCP and DEI of the TCI's first byte
		"0xff":   0xff,                                         // low byte of a 16-bit value
		"0xffff": 0xffff,                                       // 16-bit fold and "no checksum" substitute
		"0x9722": 0x9722,                                       // dxpu_udp_port (TestCUDPPortMatchesGo)
	}
	// #defines are TestCDefinesMatchGo's.
	src := regexp.MustCompile(`(?m)^[ \t]*#define[^\n]*$`).ReplaceAllString(readC(t, "switch.c"), " ")
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`\b(data|ip|udp|h)(?:\s*\+\s*(\d+)\b|\[(\d+)\])`).FindAllStringSubmatch(src, -1) {
		key, n := m[1]+" + "+m[2], m[2]
		if m[3] != "" {
			key, n = m[1]+"["+m[3]+"]", m[3]
		}
		seen[key] = true
		w, ok := offsets[key]
		v, _ := cNumber(n)
		switch {
		case !ok:
			t.Errorf("switch.c reads %s: name its offset in this test", key)
		case v != w:
			t.Errorf("switch.c reads %s, encap says %d", key, w)
		}
	}
	for key := range offsets {
		if !seen[key] {
			t.Errorf("switch.c no longer reads %s: drop it here", key)
		}
	}
	for _, lit := range regexp.MustCompile(`\b0x[0-9a-fA-F]+`).FindAllString(src, -1) {
		w, ok := masks[strings.ToLower(lit)]
		v, _ := cNumber(lit)
		switch {
		case !ok:
			t.Errorf("switch.c uses %s: name it in this test", lit)
		case v != w:
			t.Errorf("switch.c uses %s, Go says %#x", lit, w)
		}
	}
}
