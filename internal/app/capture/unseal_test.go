package capture

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// sealedCapture is a capture of sealed frames built for the unseal tests,
// with the plain dxpu frame (from the header on) each one was sealed from
// (nil for frames that must not open or are not sealed).
type sealedCapture struct {
	path, keyLog string
	plains       [][]byte
}

// writeSealedCapture seals frames of pair 5 (host and GPU side, a HELLO
// under the handshake key, TLP frames over UDP both ways on port 7001 and
// over Ethernet) with the host side logging its secrets, and adds a frame
// of pair 6 (not in the log), a sealed frame cut by the snap length, a
// plain frame of an unkeyed pair and a frame that is not dxpu.
func writeSealedCapture(t *testing.T) sealedCapture {
	t.Helper()
	dir := t.TempDir()
	var log []byte
	key := bytes.Repeat([]byte{7}, seal.KeyLen)
	host, err := seal.New(seal.Config{PairID: 5, Role: encap.RoleHost, Mode: seal.ModeGCM,
		KeyLog: func(s seal.Secret) { log = s.AppendLine(log) }}, 2, key)
	if err != nil {
		t.Fatal(err)
	}
	gpu, err := seal.New(seal.Config{PairID: 5, Role: encap.RoleGPU, Mode: seal.ModeGCM}, 2, key)
	if err != nil {
		t.Fatal(err)
	}
	other, err := seal.New(seal.Config{PairID: 6, Role: encap.RoleGPU, Mode: seal.ModeGCM}, 1, key)
	if err != nil {
		t.Fatal(err)
	}
	hn, gn := []byte("host-nonce-16byte"), []byte("gpu-nonce-16bytes")
	if err := host.StartSession(hn, gn); err != nil {
		t.Fatal(err)
	}
	if err := gpu.StartSession(gn, hn); err != nil {
		t.Fatal(err)
	}
	if err := other.StartSession(gn, hn); err != nil {
		t.Fatal(err)
	}
	l2 := &encap.L2{Dst: [6]byte{2, 0, 0, 0, 0, 2}, Src: [6]byte{2, 0, 0, 0, 0, 1}}
	toGPU := &encap.L3{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), SrcPort: 40000, DstPort: 7001}
	toHost := &encap.L3{Src: netip.MustParseAddr("10.0.0.2"), Dst: netip.MustParseAddr("10.0.0.1"), SrcPort: 7001, DstPort: 40001}
	pk := tlp.Packet{Kind: tlp.MWr, RequesterID: 0x0100, Tag: 3, FirstBE: 0xf, LastBE: 0xf, Address: 0x2000_0000,
		Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}}
	mwr, err := pk.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	// build returns a frame with the plain dxpu frame's sealed form in
	// place of it, and the plain dxpu frame.
	build := func(ch *seal.Channel, l3 *encap.L3, f *encap.Fields, tlps [][]byte, body []byte, handshake bool) ([]byte, []byte) {
		t.Helper()
		var frame []byte
		var err error
		if tlps != nil {
			frame, err = encap.AppendDxpuUDP(nil, l2, l3, f, tlps)
			if l3 == nil {
				frame, err = encap.AppendDxpuEth(nil, l2, f, tlps)
			}
		} else {
			frame, err = encap.AppendDxpuMsg(nil, l2, l3, f, body)
		}
		if err != nil {
			t.Fatal(err)
		}
		cfg := &encap.Config{}
		if l3 != nil {
			cfg.UDPPort = l3.DstPort
		}
		lay, err := encap.Walk(frame, cfg)
		if err != nil {
			t.Fatal(err)
		}
		h := encap.Header(frame[lay.Payload:])
		plain := append([]byte(nil), frame[lay.Payload:lay.Payload+encap.HeaderLen+h.BodyLen()]...)
		var sealed []byte
		if handshake {
			sealed, err = ch.SealHandshake(nil, plain, uint64(time.Second))
		} else {
			sealed, err = ch.Seal(nil, plain)
		}
		if err != nil {
			t.Fatal(err)
		}
		out := append(append([]byte(nil), frame[:lay.Payload]...), sealed...)
		if lay.Encap == encap.EncapDxpuUDP {
			fixIPv4UDP(out, lay)
		}
		return out, plain
	}
	hello := make([]byte, encap.HelloLen+16)
	hello[0], hello[1], hello[2] = byte(encap.CtlHello), 1, byte(encap.RoleGPU)
	tlpFields := &encap.Fields{PairID: 5, Seq: 9, Ack: 4, Flags: encap.FlagAck}
	type rec struct {
		frame, plain []byte
		cut          int
	}
	var recs []rec
	add := func(f, p []byte, cut int) { recs = append(recs, rec{f, p, cut}) }
	f, p := build(gpu, toHost, &encap.Fields{Type: encap.MsgControl, PairID: 5}, nil, hello, true)
	add(f, p, 0)
	f, p = build(host, toGPU, tlpFields, [][]byte{mwr, mwr}, nil, false)
	add(f, p, 0)
	f, p = build(gpu, toHost, &encap.Fields{Type: encap.MsgAck, PairID: 5, Ack: 11, Flags: encap.FlagAck}, nil, nil, false)
	add(f, p, 0)
	f, p = build(host, nil, tlpFields, [][]byte{mwr}, nil, false)
	add(f, p, 0)
	f, _ = build(other, toHost, &encap.Fields{Type: encap.MsgAck, PairID: 6}, nil, nil, false)
	add(f, nil, 0)
	f, _ = build(other, toHost, &encap.Fields{Type: encap.MsgAck, PairID: 6}, nil, nil, false)
	add(f, nil, 0)
	f, _ = build(host, toGPU, tlpFields, [][]byte{mwr}, nil, false)
	add(f, nil, len(f)-4)
	plainFrame, err := encap.AppendDxpuUDP(nil, l2, toGPU, &encap.Fields{PairID: 8}, [][]byte{mwr})
	if err != nil {
		t.Fatal(err)
	}
	add(plainFrame, plainFrame[42:], 0)
	arp := append(append([]byte(nil), plainFrame[:12]...), 0x08, 0x06)
	arp = append(arp, make([]byte, 46)...)
	add(arp, arp, 0)

	sc := sealedCapture{path: filepath.Join(dir, "sealed.pcap"), keyLog: filepath.Join(dir, "keys.log")}
	if err := os.WriteFile(sc.keyLog, log, 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := pcapio.Create(sc.path, pcapio.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		data := r.frame
		if r.cut > 0 {
			data = data[:r.cut]
		}
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(1, int64(i)*1000), CaptureLength: len(data), Length: len(r.frame)}
		if err := w.WritePacket(ci, data); err != nil {
			t.Fatal(err)
		}
		sc.plains = append(sc.plains, r.plain)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestUnseal: every sealed frame whose secrets are in the key log comes
// out as the plain frame it was sealed from (both directions, to and from
// the port, over Ethernet, under the handshake key), plain and non-dxpu
// frames come out as they were, and the frames that do not open are left
// out and named by reason, with exit status 1; pcap info then counts the
// TLPs, and before it counts the sealed frames without calling them bad.
func TestUnseal(t *testing.T) {
	sc := writeSealedCapture(t)
	s, err := Tally(sc.path, &encap.Config{UDPPort: 7001}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// Datagrams to and from port 7001 are dxpu to info, as to unseal:
	// every sealed frame counts, the cut one too.
	if s["bad"] != 0 || s["sealed"] != 7 || s["encap:dxpu-udp"] != 7 || s["encap:dxpu-eth"] != 1 || s["kind:MWr"] != 1 {
		t.Errorf("info on the sealed capture: %s", StatsLine(s))
	}

	out := filepath.Join(t.TempDir(), "plain.pcap")
	var stdout, stderr bytes.Buffer
	err = Unseal(UnsealOptions{In: sc.path, Out: out, KeyLog: sc.keyLog, UDPPort: 7001}, &stdout, &stderr)
	if !errors.Is(err, apperr.ErrFailed) {
		t.Fatalf("unseal with frames that do not open: %v, want ErrFailed", err)
	}
	if !strings.Contains(stdout.String(), "9 frames read, 4 unsealed (1 handshake), 2 copied as they were, 3 sealed frames not opened; 2 secrets") {
		t.Errorf("summary: %s", stdout.Bytes())
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	want := []string{
		"2 frames not opened (first: frame 5): pair 6 generation 1 (low byte) session frames: no key log secret for the pair and generation",
		"1 frame not opened (first: frame 7): cut by the capture's snap length (a sealed frame opens only whole)",
	}
	if len(lines) != len(want) {
		t.Fatalf("stderr:\n%s", stderr.Bytes())
	}
	for i := range want {
		if !strings.HasSuffix(lines[i], want[i]) {
			t.Errorf("stderr line %d: %q, want it to end %q", i+1, lines[i], want[i])
		}
	}

	r, err := pcapio.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got [][]byte
	for {
		data, _, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, append([]byte(nil), data...))
	}
	var wantPlain [][]byte
	for _, p := range sc.plains {
		if p != nil {
			wantPlain = append(wantPlain, p)
		}
	}
	if len(got) != len(wantPlain) {
		t.Fatalf("%d frames written, want %d", len(got), len(wantPlain))
	}
	for i, g := range got {
		lay, err := encap.Walk(g, &encap.Config{UDPPort: 7001})
		if lay.Encap == encap.EncapNone && lay.IPv4 != 0 {
			lay, err = encap.Walk(g, &encap.Config{UDPPort: 40001})
		}
		if err != nil {
			t.Fatalf("output frame %d: %v", i+1, err)
		}
		if lay.Encap == encap.EncapNone {
			lay.Payload = 0
		}
		if !bytes.Equal(g[lay.Payload:], wantPlain[i]) {
			t.Errorf("output frame %d:\n%x, want\n%x", i+1, g[lay.Payload:], wantPlain[i])
		}
	}
	s, err = Tally(out, &encap.Config{UDPPort: 7001}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if s["bad"] != 0 || s["sealed"] != 0 || s["kind:MWr"] != 4 {
		t.Errorf("info on the unsealed capture: %s", StatsLine(s))
	}

	// Usage: a key log line that does not parse names its line.
	bad := filepath.Join(t.TempDir(), "bad.log")
	if err := os.WriteFile(bad, []byte("# dxpu\nDXPU_SESSION_SECRET pair=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = Unseal(UnsealOptions{In: sc.path, Out: out, KeyLog: bad, UDPPort: 7001}, io.Discard, io.Discard)
	if !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad key log: %v", err)
	}
}

// TestUnsealOutputIs0600: finding F8 of the attack trial. The decrypted
// capture is as secret as the keys: unseal writes it 0600 (it was 0644),
// new or replacing an existing 0644 file, and leaves no temporary file.
func TestUnsealOutputIs0600(t *testing.T) {
	t.Parallel()
	sc := writeSealedCapture(t)
	dir := t.TempDir()
	fresh := filepath.Join(dir, "fresh.pcap")
	old := filepath.Join(dir, "old.pcap")
	if err := os.WriteFile(old, []byte("an earlier capture"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{fresh, old} {
		err := Unseal(UnsealOptions{In: sc.path, Out: out, KeyLog: sc.keyLog, UDPPort: 7001}, io.Discard, io.Discard)
		if err != nil && !errors.Is(err, apperr.ErrFailed) { // the capture has frames that do not open
			t.Fatal(err)
		}
		fi, err := os.Stat(out)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %#o, want 0600", filepath.Base(out), fi.Mode().Perm())
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("directory holds %d files, want 2 (no temporary left)", len(ents))
	}
}
