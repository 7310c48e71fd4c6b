package main

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/internal/app/keylog"
	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// writeKeyedCapture writes what `pcap capture --udp-port 7001` keeps of a
// keyed pair whose GPU side listens on 127.0.0.2:7001 and host side on
// 127.0.0.1:7002 (README's `vm run` pair): an MRd to 7001 and its CplD
// from 7001, both sealed, and the key log the host bridge writes
// (package keylog, as --key-log). It returns the capture and the log.
func writeKeyedCapture(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "keys.log")
	kl, err := keylog.Open(logPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer kl.Close()
	key := bytes.Repeat([]byte{9}, seal.KeyLen)
	host, err := seal.New(seal.Config{PairID: 3, Role: encap.RoleHost, Mode: seal.ModeGCM, KeyLog: kl.Log}, 1, key)
	if err != nil {
		t.Fatal(err)
	}
	gpu, err := seal.New(seal.Config{PairID: 3, Role: encap.RoleGPU, Mode: seal.ModeGCM}, 1, key)
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
	mrd, err := (&tlp.Packet{Kind: tlp.MRd, Length: 1, RequesterID: 0x0100, Tag: 5, FirstBE: 0xf, Address: 0x1000}).AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	cpld, err := (&tlp.Packet{Kind: tlp.CplD, Length: 1, CompleterID: 0x0200, RequesterID: 0x0100, Tag: 5, ByteCount: 4,
		Data: []byte{1, 2, 3, 4}}).AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	hostIP, gpuIP := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	l2 := &encap.L2{}
	sealed := func(ch *seal.Channel, l3 *encap.L3, seq uint32, tl []byte) []byte {
		t.Helper()
		plain, err := encap.AppendDxpuUDP(nil, l2, l3, &encap.Fields{PairID: 3, Seq: seq}, [][]byte{tl})
		if err != nil {
			t.Fatal(err)
		}
		const hdr = encap.EthHeaderLen + encap.IPv4HeaderLen + encap.UDPHeaderLen
		body, err := ch.Seal(nil, plain[hdr:])
		if err != nil {
			t.Fatal(err)
		}
		// The headers of a frame of the sealed length: build one of that
		// UDP payload and put the sealed bytes in.
		frame, err := encap.AppendDxpuMsg(nil, l2, l3, &encap.Fields{Type: encap.MsgControl, PairID: 3}, make([]byte, len(body)-encap.HeaderLen))
		if err != nil {
			t.Fatal(err)
		}
		copy(frame[hdr:], body)
		frame[hdr-encap.UDPHeaderLen+encap.UDPChecksumOffset], frame[hdr-encap.UDPHeaderLen+encap.UDPChecksumOffset+1] = 0, 0 // none
		return frame
	}
	frames := [][]byte{
		sealed(host, &encap.L3{Src: hostIP, Dst: gpuIP, SrcPort: 7002, DstPort: 7001}, 1, mrd),
		sealed(gpu, &encap.L3{Src: gpuIP, Dst: hostIP, SrcPort: 7001, DstPort: 7002}, 1, cpld),
	}
	path := filepath.Join(dir, "sealed.pcap")
	w, err := pcapio.Create(path, pcapio.WriterOptions{Nanos: true})
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
	return path, logPath
}

// TestUnsealThenDecode: finding 1 of the new user's trial, README.md's
// chain as a user runs it. `pcap unseal --udp-port 7001` opens a keyed
// pair's capture; `tlp decode --pcap` on the plain capture with the same
// --udp-port decodes the TLPs of both directions (to and from the port),
// and `pcap info --udp-port` counts them. Without --udp-port, decode used
// to print nothing and exit 0: it still exits 0 with no result, and says
// on stderr in one line that none of the frames held a TLP on the ports it
// read, naming --udp-port and the capture's port.
func TestUnsealThenDecode(t *testing.T) {
	t.Parallel()
	sealedPcap, keys := writeKeyedCapture(t)
	plain := filepath.Join(t.TempDir(), "plain.pcap")

	code, stdout, stderr := runPcap(t.Context(), "pcap", "unseal", "--key-log", keys, "--udp-port", "7001", sealedPcap, plain)
	if code != 0 || !strings.Contains(stdout, "2 frames read, 2 unsealed") || stderr != "" {
		t.Fatalf("pcap unseal: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	code, stdout, stderr = runPcap(t.Context(), "tlp", "decode", "--pcap", plain, "--udp-port", "7001")
	var kinds []string
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var m struct{ Kind, Error string }
		if err := json.Unmarshal([]byte(l), &m); err != nil || m.Error != "" {
			t.Fatalf("tlp decode --udp-port 7001: line %q (%v)", l, err)
		}
		kinds = append(kinds, m.Kind)
	}
	if code != 0 || strings.Join(kinds, ",") != "MRd,CplD" || stderr != "" {
		t.Errorf("tlp decode --pcap plain.pcap --udp-port 7001: exit %d, TLPs %v, stderr %q; want 0, the MRd and the CplD, nothing",
			code, kinds, stderr)
	}

	code, stdout, stderr = runPcap(t.Context(), "pcap", "info", "--json", "--udp-port", "7001", plain)
	var info struct {
		TLPsByKind map[string]int `json:"tlps_by_kind"`
	}
	if err := json.Unmarshal([]byte(stdout), &info); code != 0 || err != nil || info.TLPsByKind["MRd"] != 1 || info.TLPsByKind["CplD"] != 1 {
		t.Errorf("pcap info --udp-port 7001: exit %d, %v, %s%s; want the MRd and the CplD", code, err, stdout, stderr)
	}

	code, stdout, stderr = runPcap(t.Context(), "tlp", "decode", "--pcap", plain)
	if code != 0 || stdout != "" || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("tlp decode --pcap plain.pcap: exit %d, stdout %q, stderr %q; want 0, nothing, one line", code, stdout, stderr)
	}
	for _, w := range []string{plain + ": 2 frames read, none holds a TLP", "port 8855", "0x3000-0x30ff", "--udp-port N",
		"the most frequent UDP port here is 7001"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("tlp decode --pcap plain.pcap: stderr %q; want it to say %q", stderr, w)
		}
	}
}

// TestTLPDecodeUDPPortNeedsPcap: --udp-port applies to a capture only.
func TestTLPDecodeUDPPortNeedsPcap(t *testing.T) {
	t.Parallel()
	args := []string{"tlp", "decode", "--udp-port", "7001", "00000001 0100050f fedc0010"}
	code, stdout, stderr := runPcap(t.Context(), args...)
	usageLine(t, args, code, stdout, stderr, "dxpu: tlp decode: --udp-port reads a capture's dxpu frames: give it with --pcap")
}

// TestUDPPortZeroRefused: every command with --udp-port refuses 0 in the
// same words (pcap info and pcap convert read it as 8855, tlp decode
// refused it).
func TestUDPPortZeroRefused(t *testing.T) {
	t.Parallel()
	mix := filepath.Join(repoRoot, "testdata", "pcap", "mix.pcap")
	out := filepath.Join(t.TempDir(), "out.pcap")
	for _, args := range [][]string{
		{"tlp", "decode", "--pcap", mix, "--udp-port", "0"},
		{"pcap", "info", "--udp-port", "0", mix},
		{"pcap", "convert", "--in", mix, "--out", out, "--to", "dxpu-udp", "--udp-port", "0"},
		{"pcap", "unseal", "--key-log", out, mix, out, "--udp-port", "0"},
		{"pcap", "capture", "--interface", "lo", "--out", out, "--udp-port", "0"},
		{"replay", "--pcap", mix, "--table", out, "--udp-port", "0"},
		{"switch", "--mode", "udp", "--udp-port", "0"},
	} {
		code, stdout, stderr := runPcap(t.Context(), args...)
		usageLine(t, args, code, stdout, stderr, `dxpu: invalid argument "0" for "--udp-port" flag: want the dxpu UDP port, 1..65535`)
	}
}

// A capture still sealed is not a capture of broken frames: `tlp decode
// --pcap` says in one line that its frames are sealed and how to unseal
// them, prints no error object per frame, and exits 1 (the TLPs asked for
// are not there to print).
func TestDecodeSealedCaptureSaysUnseal(t *testing.T) {
	t.Parallel()
	sealedPcap, _ := writeKeyedCapture(t)
	code, stdout, stderr := runPcap(t.Context(), "tlp", "decode", "--pcap", sealedPcap, "--udp-port", "7001")
	if code != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 ||
		!strings.Contains(stderr, "2 of 2 frames are sealed") || !strings.Contains(stderr, "dxpu pcap unseal --key-log FILE --udp-port 7001") {
		t.Errorf("tlp decode --pcap sealed.pcap --udp-port 7001: exit %d, stdout %q, stderr %q; want 1, nothing, one line saying the frames are sealed and how to unseal them",
			code, stdout, stderr)
	}
}

// TestUnsealSummary: third new-user trial. pcap unseal's summary counts
// in words that agree with the number ("1 secret", "1 sealed frame", not
// "1 secrets"); --json prints it as one indented object, keys as pcap
// info's; OUT "-" is refused in one line (it wrote a file named "-": no
// pcap command writes a capture to standard output).
func TestUnsealSummary(t *testing.T) {
	t.Parallel()
	sealedPcap, keys := writeKeyedCapture(t)
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain.pcap")

	// The second frame with its last byte (the tag's) altered does not
	// open; one secret (the log's session secret) opens the first.
	log, err := os.ReadFile(keys)
	if err != nil {
		t.Fatal(err)
	}
	var first string
	for _, l := range strings.Split(string(log), "\n") {
		if strings.HasPrefix(l, seal.KeyLogSession+" ") {
			first = l
			break
		}
	}
	one := filepath.Join(dir, "one.log")
	if err := os.WriteFile(one, []byte(first+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := pcapio.OpenEthernet(sealedPcap)
	if err != nil {
		t.Fatal(err)
	}
	forged := filepath.Join(dir, "forged.pcap")
	w, err := pcapio.Create(forged, pcapio.WriterOptions{Nanos: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		data, ci, err := r.Next()
		if err != nil {
			break
		}
		if i == 1 {
			data[len(data)-1] ^= 1
		}
		if err := w.WritePacket(ci, data); err != nil {
			t.Fatal(err)
		}
	}
	r.Close()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runPcap(t.Context(), "pcap", "unseal", "--key-log", one, "--udp-port", "7001", forged, plain)
	want := plain + ": 2 frames read, 1 unsealed (0 handshake), 0 copied as they were, 1 sealed frame not opened; 1 secret in " + one + "\n"
	if code != 1 || stdout != want || !strings.Contains(stderr, ": 1 frame not opened (first: frame 2)") ||
		!strings.HasSuffix(stderr, "dxpu: 1 sealed frame of "+forged+" did not open\n") {
		t.Errorf("pcap unseal with one secret and a forged frame: exit %d, stdout %q, stderr %q; want 1, %q, and the counts in the singular", code, stdout, stderr, want)
	}

	code, stdout, stderr = runPcap(t.Context(), "pcap", "unseal", "--json", "--key-log", keys, "--udp-port", "7001", sealedPcap, plain)
	var got map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); code != 0 || err != nil || stderr != "" || !strings.HasPrefix(stdout, "{\n  \"") {
		t.Fatalf("pcap unseal --json: exit %d, %v, stdout %q, stderr %q; want 0 and one indented object", code, err, stdout, stderr)
	}
	lines := float64(strings.Count(string(log), "\n"))
	for k, v := range map[string]any{"in": sealedPcap, "out": plain, "key_log": keys, "frames": 2.0, "unsealed_frames": 2.0,
		"handshake_frames": 0.0, "copied_frames": 0.0, "unopened_frames": 0.0, "secrets": lines} {
		if got[k] != v {
			t.Errorf("pcap unseal --json: %q is %v, want %v (%s)", k, got[k], v, stdout)
		}
	}
	if len(got) != 9 {
		t.Errorf("pcap unseal --json: %d keys, want 9: %s", len(got), stdout)
	}

	args := []string{"pcap", "unseal", "--key-log", keys, "--udp-port", "7001", sealedPcap, "-"}
	code, stdout, stderr = runPcap(t.Context(), args...)
	_ = os.Remove("-") // what the bug wrote
	usageLine(t, args, code, stdout, stderr, `dxpu: unseal: OUT "-": want a file: pcap commands write captures to files, not standard output`)
}
