package wireshark

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/internal/app/bridged"
	"github.com/dxpu/dxpu/internal/app/capture"
	"github.com/dxpu/dxpu/internal/app/keylog"
	"github.com/dxpu/dxpu/internal/app/tlpcodec"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// The sealed pair's UDP port: not 8855, so that the dissector must find
// it by its heuristic and unseal by --udp-port.
const sealedPort = 7101

// TestSealedPairCapture runs a keyed pair (two bridge daemons over UDP on
// loopback, GCM, --key-log) carrying known writes and reads while an
// AF_PACKET socket on lo captures its frames, then checks what an operator
// sees: tshark with the dissector shows every sealed frame's seal header
// field by field (SEALED bit, epoch, kind, echo, generation, packet
// number, tag) and no error expert info; `pcap unseal` with the key log
// opens every frame; the unsealed capture's TLPs (tlp decode --pcap, and
// encap) are those the bridges counted, carrying the data written and read
// back; and the dissector shows the unsealed capture field by field as
// dxpu's decoder reads it.
func TestSealedPairCapture(t *testing.T) {
	privtest.Root(t)
	dir := t.TempDir()
	keyLogPath := filepath.Join(dir, "keys.log")
	kl, err := keylog.Open(keyLogPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer kl.Close()

	hostUDP := netip.MustParseAddrPort(fmt.Sprintf("127.0.43.10:%d", sealedPort))
	gpuUDP := netip.MustParseAddrPort(fmt.Sprintf("127.0.43.11:%d", sealedPort))
	bridgeAddr, hostAddr := netip.MustParseAddr("127.0.43.1"), netip.MustParseAddr("127.0.43.2")
	// `dxpu pcap capture` on lo, keeping the pair's datagrams (to or from
	// the port) once each.
	sealedPcap := filepath.Join(dir, "sealed.pcap")
	capCtx, stopCapture := context.WithCancel(t.Context())
	defer stopCapture()
	capReady, capDone := make(chan struct{}), make(chan error, 1)
	var capSummary bytes.Buffer
	go func() {
		capDone <- capture.Live(capCtx, capture.LiveOptions{Interface: "lo", Out: sealedPcap, UDPPort: sealedPort,
			Ready: func() { close(capReady) }}, &capSummary)
	}()
	select {
	case <-capReady:
	case err := <-capDone:
		t.Fatalf("capture did not start: %v", err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	base := func(o bridged.Options) bridged.Options {
		o.Pair, o.Keepalive, o.DeadAfter, o.CompletionTimeout = 21, 100*time.Millisecond, 5*time.Second, 5*time.Second
		o.GPUModel = gpu.H100SXM
		o.Key, o.KeyGeneration, o.SealMode = bytes.Repeat([]byte{0xa5}, seal.KeyLen), 3, seal.ModeGCM
		o.KeyLog = kl.Log
		return o
	}
	daemons := make(chan *bridged.Daemon, 2)
	done := make(chan error, 2)
	go func() {
		done <- bridged.Run(ctx, base(bridged.Options{Role: bridge.RoleGPU, Listen: gpuUDP, Peer: hostUDP,
			PCIe: bridged.PCIe{Kind: bridged.KindEmuGPU}, Metrics: "127.0.43.11:0", Ready: func(d *bridged.Daemon) { daemons <- d }}))
	}()
	go func() {
		done <- bridged.Run(ctx, base(bridged.Options{Role: bridge.RoleHost, Listen: hostUDP, Peer: gpuUDP,
			PCIe: bridged.PCIe{Kind: bridged.KindNetTLP, Local: bridgeAddr, Remote: hostAddr}, Metrics: "127.0.43.10:0",
			Ready: func(d *bridged.Daemon) { daemons <- d }}))
	}()
	stopped := 0
	defer func() {
		cancel()
		for ; stopped < 2; stopped++ {
			<-done
		}
	}()
	var ds []*bridged.Daemon
	for range 2 {
		select {
		case d := <-daemons:
			ds = append(ds, d)
		case err := <-done:
			stopped++
			t.Fatalf("a bridge did not start: %v", err)
		}
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for ds[0].State() != bridge.StateUp || ds[1].State() != bridge.StateUp {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("pair not up within the test's deadline")
		}
	}

	c, err := nettlp.Dial(hostAddr, bridgeAddr, 1, tlp.NewID(0, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Timeout = 5 * time.Second
	const vram = 0x20_0000_3000
	want := make([]byte, 1024)
	for i := range want {
		want[i] = byte(i*7 + 1)
	}
	if _, err := c.WriteAligned(vram, want, 256); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	if n, err := c.Read(vram, got); err != nil || n != len(got) || !bytes.Equal(got, want) {
		t.Fatalf("VRAM read back %d bytes (%v), equal %v", n, err, bytes.Equal(got, want))
	}

	// Stop the bridges first: every frame they sent is then in the
	// capture socket's queue (AF_PACKET sees a frame on lo as it is sent).
	counted := map[string]uint64{}
	for _, d := range ds {
		for k, v := range scrape(t, d.MetricsAddr().String(), "dxpu_bridge_tlps_sent_total", "dxpu_bridge_retransmits_total") {
			counted[k] = v
		}
	}
	cancel()
	for ; stopped < 2; stopped++ {
		if err := <-done; err != nil {
			t.Fatalf("bridge stopped with %v", err)
		}
	}
	stopCapture()
	if err := <-capDone; err != nil {
		t.Fatalf("capture: %v", err)
	}
	if !strings.Contains(capSummary.String(), "(0 dropped by the kernel)") {
		t.Fatalf("capture: %s", capSummary.Bytes())
	}
	frames := readFrames(t, sealedPcap)
	for i, f := range frames {
		// 127.0.43.10 and .11 only: the filter kept the port's datagrams.
		if !bytes.Equal(f[26:29], []byte{127, 0, 43}) || !bytes.Equal(f[30:33], []byte{127, 0, 43}) {
			t.Fatalf("captured frame %d is not the pair's: % x", i+1, f[:42])
		}
	}
	t.Logf("captured %d frames; bridges counted %v", len(frames), counted)

	// Every frame is sealed: the key log is what opens them.
	secrets, err := os.ReadFile(keyLogPath)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(keyLogPath); st.Mode().Perm() != 0o600 {
		t.Errorf("key log mode %v, want 0600", st.Mode().Perm())
	}
	if bytes.Contains(secrets, []byte(strings.Repeat("a5", 32))) {
		t.Fatal("the key log holds the pair key")
	}
	for i, f := range frames {
		if encap.Header(f[udpHdr:]).Flags()&seal.FlagSealed == 0 || f[udpHdr+43] != 3 {
			t.Fatalf("captured frame %d is not sealed under key generation 3: % x", i+1, f[udpHdr:udpHdr+52])
		}
	}

	unsealed := filepath.Join(dir, "unsealed.pcap")
	var out, errOut bytes.Buffer
	if err := capture.Unseal(capture.UnsealOptions{In: sealedPcap, Out: unsealed, KeyLog: keyLogPath, UDPPort: sealedPort,
		OutUDPPort: encap.DefaultUDPPort}, &out, &errOut); err != nil {
		t.Fatalf("unseal: %v\n%s%s", err, out.Bytes(), errOut.Bytes())
	}
	t.Logf("unseal: %s", strings.TrimSpace(out.String()))
	if !strings.Contains(out.String(), fmt.Sprintf("%d frames read, %d unsealed", len(frames), len(frames))) || errOut.Len() > 0 {
		t.Fatalf("unseal did not open every frame:\n%s%s", out.Bytes(), errOut.Bytes())
	}

	checkUnsealedTLPs(t, unsealed, counted, want)

	tshark := tsharkPath(t)
	t.Run("dissector on the sealed capture", func(t *testing.T) {
		shown := dissect(t, tshark, sealedPcap)
		if len(shown) != len(frames) {
			t.Fatalf("tshark shows %d frames, the capture holds %d", len(shown), len(frames))
		}
		reported := 0
		for i, f := range frames {
			for _, p := range checkSealedFrame(shown[i], f[udpHdr:]) {
				if reported++; reported <= maxReported {
					t.Errorf("frame %d: %s", i+1, p)
				}
			}
		}
	})
	t.Run("dissector on the unsealed capture", func(t *testing.T) {
		n := checkCapture(t, tshark, unsealed)
		t.Logf("compared %+v", n)
		if n.tlps == 0 || n.controls == 0 || n.errors != 0 {
			t.Errorf("the unsealed capture should show TLPs and control messages, no errors: %+v", n)
		}
	})
}

// checkSealedFrame compares what tshark shows of a sealed frame (b from
// the dxpu header on) with its bytes: the clear header, the seal header
// and the tag, and no error expert info.
func checkSealedFrame(layers map[string]any, b []byte) []string {
	dx, ok := layers["dxpu"].(map[string]any)
	if !ok {
		return []string{"no dxpu layer (the heuristic did not find it)"}
	}
	var problems []string
	if ex := experts(dx, stopNone); len(ex) > 0 || hasKey(layers, "_ws.malformed") || hasKey(layers, "_ws.lua.error") {
		problems = append(problems, fmt.Sprintf("error expert infos on a well-formed sealed frame: %v", ex))
	}
	h := encap.Header(b)
	n := h.BodyLen()
	wantFields := headerFields(h)
	wantFields["dxpu.flags.sealed"] = true
	wantFields["dxpu.seal.epoch"] = uint64(b[40])
	wantFields["dxpu.seal.kind"] = uint64(b[41])
	wantFields["dxpu.seal.mode"] = uint64(b[41] & 3)
	wantFields["dxpu.seal.handshake"] = b[41]&0x80 != 0
	wantFields["dxpu.seal.kind_reserved"] = uint64(0)
	wantFields["dxpu.seal.echo"] = uint64(b[42])
	wantFields["dxpu.seal.generation"] = uint64(b[43])
	wantFields["dxpu.seal.packet_number"] = binary.BigEndian.Uint64(b[44:])
	over, bodyAt := seal.Overhead, 52
	if b[41]&0x80 != 0 { // the handshake key: the boot ID follows the packet number
		over, bodyAt = seal.HandshakeOverhead, 60
		wantFields["dxpu.seal.boot_id"] = b[52:60]
	}
	wantFields["dxpu.seal.body_len"] = uint64(n - over)
	if n > over && b[41]&3 == byte(seal.ModeGMAC) {
		wantFields["dxpu.seal.plaintext"] = b[bodyAt : 40+n-seal.TagLen]
	} else if n > over {
		wantFields["dxpu.seal.ciphertext"] = b[bodyAt : 40+n-seal.TagLen]
	}
	wantFields["dxpu.seal.tag"] = b[40+n-seal.TagLen : 40+n]
	// The seal subtree is the "dxpu.seal" item's own object; what a GMAC
	// frame's clear body shows (TLPs, control message) is compared with
	// its plain frame's by TestSealedFramesDissected.
	shown := flatten(dx, stopAt(bodyKeys...))
	st, ok := dx["dxpu.seal"].(map[string]any)
	if !ok {
		return append(problems, "no dxpu.seal subtree")
	}
	for k, v := range flatten(st, stopNone) {
		shown[k] = v
	}
	return append(problems, diff(wantFields, shown, "dxpu.")...)
}

// bodyKeys are the fields of a dxpu frame's body (and the seal subtree).
var bodyKeys = []string{"dxpu.seal", "dxpu.tlp", "dxpu.ctl", "dxpu.tlp_len", "dxpu.body"}

// TestSealedFramesDissected: sealed frames of both modes (a HELLO under
// the handshake key, TLP frames, an ACK; over UDP to a port found by the
// heuristic, and over Ethernet) show their seal fields and no error, and
// a GMAC frame's clear body shows exactly as its plain frame's does.
func TestSealedFramesDissected(t *testing.T) {
	t.Parallel()
	tshark := tsharkPath(t)
	dir := t.TempDir()
	mrd := mustTLP(t, tlp.Packet{Kind: tlp.MRd, Length: 1, RequesterID: 0x0100, Tag: 0x305, FirstBE: 0xf, Address: 0xf0001000})
	mwr := mustTLP(t, tlp.Packet{Kind: tlp.MWr, RequesterID: 0x0208, Tag: 7, FirstBE: 0xf, LastBE: 0xf,
		Address: 0x1_2345_6780, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}})
	hello := encap.Control{Type: encap.CtlHello, Role: encap.RoleGPU, TagBits: 10, Session: 0x1234, Window: 64, MaxTLP: 4096}
	udpL3 := &encap.L3{Src: l3.Src, Dst: l3.Dst, SrcPort: 40000, DstPort: sealedPort}
	var sealedFrames, plainFrames [][]byte
	for _, m := range []seal.Mode{seal.ModeGCM, seal.ModeGMAC} {
		key := bytes.Repeat([]byte{byte(m)}, seal.KeyLen)
		host, err := seal.New(seal.Config{PairID: 33, Role: encap.RoleHost, Mode: m}, 2, key)
		if err != nil {
			t.Fatal(err)
		}
		gpuCh, err := seal.New(seal.Config{PairID: 33, Role: encap.RoleGPU, Mode: m}, 2, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := host.StartSession([]byte("hhhh"), []byte("gggg")); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			ch        *seal.Channel
			l3        *encap.L3
			f         encap.Fields
			tlps      [][]byte
			body      []byte
			handshake bool
		}{
			{gpuCh, udpL3, encap.Fields{Type: encap.MsgControl, PairID: 33}, nil, append(hello.AppendTo(nil), make([]byte, 16)...), true},
			{host, udpL3, encap.Fields{PairID: 33, Seq: 7, Ack: 3, Flags: encap.FlagAck}, [][]byte{mrd, mwr}, nil, false},
			{host, nil, encap.Fields{PairID: 33, Seq: 9}, [][]byte{mwr}, nil, false},
			{host, udpL3, encap.Fields{Type: encap.MsgAck, PairID: 33, Ack: 12, Flags: encap.FlagAck}, nil, nil, false},
		} {
			var frame []byte
			var err error
			switch {
			case c.tlps == nil:
				frame, err = encap.AppendDxpuMsg(nil, l2, c.l3, &c.f, c.body)
			case c.l3 == nil:
				frame, err = encap.AppendDxpuEth(nil, l2, &c.f, c.tlps)
			default:
				frame, err = encap.AppendDxpuUDP(nil, l2, c.l3, &c.f, c.tlps)
			}
			if err != nil {
				t.Fatal(err)
			}
			at := udpHdr
			if c.l3 == nil {
				at = ethHdr
			}
			plain := frame[at : at+encap.HeaderLen+encap.Header(frame[at:]).BodyLen()]
			var sealed []byte
			if c.handshake {
				sealed, err = c.ch.SealHandshake(append([]byte(nil), frame[:at]...), plain, 1<<40)
			} else {
				sealed, err = c.ch.Seal(append([]byte(nil), frame[:at]...), plain)
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.l3 != nil {
				// IPv4 total length and checksum, UDP length (checksum 0: none).
				ip := sealed[ethHdr:]
				binary.BigEndian.PutUint16(ip[2:], uint16(len(sealed)-ethHdr))
				binary.BigEndian.PutUint16(ip[10:], 0)
				var sum uint32
				for i := 0; i < 20; i += 2 {
					sum += uint32(binary.BigEndian.Uint16(ip[i:]))
				}
				sum = sum&0xffff + sum>>16
				binary.BigEndian.PutUint16(ip[10:], ^uint16(sum+sum>>16))
				binary.BigEndian.PutUint16(sealed[ethHdr+20+4:], uint16(len(sealed)-ethHdr-20))
				binary.BigEndian.PutUint16(sealed[ethHdr+20+6:], 0)
			}
			sealedFrames = append(sealedFrames, sealed)
			plainFrames = append(plainFrames, frame)
		}
	}
	write := func(name string, frames [][]byte) string {
		path := filepath.Join(dir, name)
		w, err := pcapio.Create(path, pcapio.WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i, f := range frames {
			if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(int64(i), 0), CaptureLength: len(f), Length: len(f)}, f); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
	sealedShown := dissect(t, tshark, write("sealed.pcap", sealedFrames))
	plainShown := dissect(t, tshark, write("plain.pcap", plainFrames))
	gmac := 0
	for i, f := range sealedFrames {
		at := udpHdr
		if f[12] == 0x88 {
			at = ethHdr
		}
		for _, p := range checkSealedFrame(sealedShown[i], f[at:]) {
			t.Errorf("sealed frame %d: %s", i+1, p)
		}
		if f[at+41]&3 != byte(seal.ModeGMAC) {
			continue
		}
		gmac++
		sdx, _ := sealedShown[i]["dxpu"].(map[string]any)
		pdx, _ := plainShown[i]["dxpu"].(map[string]any)
		for _, k := range bodyKeys[1:] {
			if !reflect.DeepEqual(sdx[k], pdx[k]) {
				t.Errorf("GMAC frame %d: %s shows %v, its plain frame %v", i+1, k, sdx[k], pdx[k])
			}
		}
		if sdx["dxpu.tlp"] == nil && sdx["dxpu.ctl"] == nil && sdx["dxpu.body"] == nil && f[at+1] != byte(encap.MsgAck) {
			t.Errorf("GMAC frame %d: no body shown", i+1)
		}
	}
	if gmac != 4 {
		t.Fatalf("%d GMAC frames compared, want 4", gmac)
	}
}

// checkUnsealedTLPs reads the unsealed capture with encap (every TLP by
// direction and sequence number) and tlp decode --pcap, and checks them
// against the bridges' counters and the data written and read back.
func checkUnsealedTLPs(t *testing.T, path string, counted map[string]uint64, want []byte) {
	t.Helper()
	s, err := capture.Tally(path, &encap.Config{UDPPort: encap.DefaultUDPPort}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if s["bad"] != 0 || s["encap:dxpu-udp"] != s["frames"] {
		t.Fatalf("pcap info on the unsealed capture: %s", capture.StatsLine(s))
	}
	t.Logf("pcap info: %s", capture.StatsLine(s))

	r, err := pcapio.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	type key struct {
		host bool
		seq  uint32
	}
	seen := map[key]bool{}
	onWire := map[bool]uint64{}
	written := make([]byte, len(want))
	var readBack []byte
	for {
		data, _, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		f, err := encap.ParseFrame(data, nil)
		if err != nil {
			t.Fatalf("unsealed frame does not parse: %v", err)
		}
		fromHost := f.SrcIP() == netip.MustParseAddr("127.0.43.10")
		for i := range f.NumTLPs() {
			b, _ := f.TLP(i)
			onWire[fromHost]++
			k := key{fromHost, f.Header().Seq() + uint32(i)}
			if seen[k] {
				continue // a retransmission
			}
			seen[k] = true
			v, err := tlp.Parse(b)
			if err != nil {
				t.Fatalf("TLP does not parse: %v", err)
			}
			switch {
			case fromHost && v.Kind() == tlp.MWr && v.Address() >= 0x20_0000_3000 && v.Address() < 0x20_0000_3000+uint64(len(want)):
				copy(written[v.Address()-0x20_0000_3000:], v.Payload())
			case !fromHost && v.Kind() == tlp.CplD && v.PayloadLen() > 4:
				readBack = append(readBack, v.Payload()...)
			}
		}
	}
	for _, side := range []struct {
		host bool
		role string
	}{{true, "host"}, {false, "gpu"}} {
		unique := 0
		for k := range seen {
			if k.host == side.host {
				unique++
			}
		}
		sent, re := counted["dxpu_bridge_tlps_sent_total/"+side.role], counted["dxpu_bridge_retransmits_total/"+side.role]
		if uint64(unique) != sent || onWire[side.host] != sent+re {
			t.Errorf("%s side: %d distinct TLPs and %d on the wire in the unsealed capture; the bridge counted %d sent and %d retransmitted",
				side.role, unique, onWire[side.host], sent, re)
		}
	}
	if !bytes.Equal(written, want) {
		t.Errorf("the MWr TLPs in the unsealed capture do not carry the data written")
	}
	if !bytes.Equal(readBack, want) {
		t.Errorf("the CplD TLPs in the unsealed capture carry %d bytes, not the data read back", len(readBack))
	}

	var dec bytes.Buffer
	if err := tlpcodec.Decode(nil, path, nil, &dec); err != nil {
		t.Fatalf("tlp decode --pcap: %v", err)
	}
	lines := 0
	sc := bufio.NewScanner(&dec)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m["error"] != nil {
			t.Fatalf("tlp decode --pcap: %s (%v)", sc.Bytes(), err)
		}
		lines++
	}
	if uint64(lines) != onWire[true]+onWire[false] {
		t.Errorf("tlp decode --pcap decoded %d TLPs, the capture holds %d", lines, onWire[true]+onWire[false])
	}
}

// scrape returns the named counters of a daemon's /metrics as
// "name/role" -> value.
func scrape(t *testing.T, addr string, names ...string) map[string]uint64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]uint64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		for _, n := range names {
			if !strings.HasPrefix(line, n+"{") {
				continue
			}
			i := strings.Index(line, `role="`)
			role := line[i+6:]
			role = role[:strings.IndexByte(role, '"')]
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				t.Fatalf("metrics line %q: %v", line, err)
			}
			out[n+"/"+role] = uint64(v)
		}
	}
	return out
}

// readFrames returns the frames of a capture.
func readFrames(t *testing.T, path string) [][]byte {
	t.Helper()
	r, err := pcapio.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out [][]byte
	for {
		data, _, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, append([]byte(nil), data...))
	}
}
