package tlpcodec

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"

	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// writePortCapture writes a pair on UDP ports 7002 (the host side) and
// 7001 (the GPU side), as `dxpu vm run` and a bridge on 7001 are: an MRd
// to 7001, its CplD from 7001, then a datagram of another service and an
// ARP frame.
func writePortCapture(t *testing.T) string {
	t.Helper()
	l2 := &encap.L2{Dst: [6]byte{2, 0, 0, 0, 0, 2}, Src: [6]byte{2, 0, 0, 0, 0, 1}}
	a, b := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	mrd, err := (&tlp.Packet{Kind: tlp.MRd, Length: 1, RequesterID: 0x0100, Tag: 5, FirstBE: 0xf, Address: 0x1000}).AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	cpld, err := (&tlp.Packet{Kind: tlp.CplD, Length: 1, CompleterID: 0x0200, RequesterID: 0x0100, Tag: 5, ByteCount: 4,
		Data: []byte{1, 2, 3, 4}}).AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	var frames [][]byte
	add := func(l3 *encap.L3, tl []byte) {
		t.Helper()
		f, err := encap.AppendDxpuUDP(nil, l2, l3, &encap.Fields{PairID: 1}, [][]byte{tl})
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, f)
	}
	add(&encap.L3{Src: a, Dst: b, SrcPort: 7002, DstPort: 7001}, mrd)
	add(&encap.L3{Src: b, Dst: a, SrcPort: 7001, DstPort: 7002}, cpld)
	add(&encap.L3{Src: a, Dst: b, SrcPort: 40000, DstPort: 53}, mrd) // not dxpu: port 53
	arp := append(append([]byte(nil), frames[0][:12]...), 0x08, 0x06)
	frames = append(frames, append(arp, make([]byte, 46)...))

	path := filepath.Join(t.TempDir(), "ports.pcap")
	w, err := pcapio.Create(path, pcapio.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range frames {
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(1, int64(i)), CaptureLength: len(f), Length: len(f)}, f); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDecodePcapUDPPort: finding 1 of the new user's trial. With the
// pair's port, decode reads both directions (to and from the port, as
// `pcap capture` and `pcap unseal` take --udp-port); without it, a capture
// that holds no TLP where decode looked says so in one stderr line that
// names the frames read, the ports looked at, --udp-port and the port the
// capture's datagrams use, instead of printing nothing.
func TestDecodePcapUDPPort(t *testing.T) {
	t.Parallel()
	path := writePortCapture(t)

	var out, errb bytes.Buffer
	if err := DecodeWith(Options{Pcap: path, UDPPort: 7001}, nil, &out, &errb); err != nil {
		t.Fatalf("--udp-port 7001: %v", err)
	}
	var kinds []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m struct {
			Kind  string
			Frame int
			Encap string
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		kinds = append(kinds, m.Kind+"@"+m.Encap)
	}
	if strings.Join(kinds, " ") != "MRd@dxpu-udp CplD@dxpu-udp" || errb.Len() > 0 {
		t.Errorf("--udp-port 7001 decoded %v, stderr %q; want the MRd to 7001 and the CplD from it, no note", kinds, errb.String())
	}

	out.Reset()
	errb.Reset()
	if err := DecodeWith(Options{Pcap: path, UDPPort: encap.DefaultUDPPort}, nil, &out, &errb); err != nil {
		t.Fatalf("default port: %v (want exit status 0: the capture is not bad)", err)
	}
	want := "dxpu tlp decode: " + path + ": 4 frames read, none holds a TLP as dxpu (EtherType 0x88B5, or UDP to or from port 8855) " +
		"or NetTLP (UDP ports 0x3000-0x30ff); --udp-port N reads dxpu on UDP port N " +
		"(the most frequent UDP port here is 7001, in 2 of 3 datagrams)\n"
	if out.Len() > 0 || errb.String() != want {
		t.Errorf("default port: stdout %q, stderr\n%q; want nothing and\n%q", out.String(), errb.String(), want)
	}

	// Decode (no stderr) stays quiet; hex input gets no note.
	out.Reset()
	if err := Decode(nil, path, nil, &out); err != nil || out.Len() > 0 {
		t.Errorf("Decode: %v, %q", err, out.String())
	}
	errb.Reset()
	if err := DecodeWith(Options{}, strings.NewReader(""), &out, &errb); err != nil || errb.Len() > 0 {
		t.Errorf("empty hex input: %v, stderr %q", err, errb.String())
	}
	if err := DecodeWith(Options{Pcap: path}, nil, &out, &errb); err == nil || !strings.Contains(err.Error(), "--udp-port 0") {
		t.Errorf("--udp-port 0: %v, want a usage error", err)
	}
}
