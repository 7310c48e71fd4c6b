package capture

import (
	"bytes"
	"context"
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
	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// fuzzSealed returns a small capture of sealed dxpu frames (a HELLO under
// the handshake key, a TLP frame over UDP and over Ethernet, an ACK) and
// the key log that opens them.
func fuzzSealed(tb testing.TB) (capture, keyLog []byte) {
	tb.Helper()
	key := bytes.Repeat([]byte{7}, seal.KeyLen)
	host, err := seal.New(seal.Config{PairID: 5, Role: encap.RoleHost, Mode: seal.ModeGCM,
		KeyLog: func(s seal.Secret) { keyLog = s.AppendLine(keyLog) }}, 2, key)
	if err != nil {
		tb.Fatal(err)
	}
	gpu, err := seal.New(seal.Config{PairID: 5, Role: encap.RoleGPU, Mode: seal.ModeGCM}, 2, key)
	if err != nil {
		tb.Fatal(err)
	}
	hn, gn := []byte("host-nonce-16byte"), []byte("gpu-nonce-16bytes")
	if err := host.StartSession(hn, gn); err != nil {
		tb.Fatal(err)
	}
	if err := gpu.StartSession(gn, hn); err != nil {
		tb.Fatal(err)
	}
	pk := tlp.Packet{Kind: tlp.MWr, RequesterID: 0x0100, Tag: 3, FirstBE: 0xf, LastBE: 0xf, Address: 0x2000_0000, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}}
	mwr, err := pk.AppendTo(nil)
	if err != nil {
		tb.Fatal(err)
	}
	l2 := &encap.L2{Dst: [6]byte{2, 0, 0, 0, 0, 2}, Src: [6]byte{2, 0, 0, 0, 0, 1}}
	toGPU := &encap.L3{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), SrcPort: 40000, DstPort: encap.DefaultUDPPort}
	toHost := &encap.L3{Src: netip.MustParseAddr("10.0.0.2"), Dst: netip.MustParseAddr("10.0.0.1"), SrcPort: encap.DefaultUDPPort, DstPort: 40001}
	var buf bytes.Buffer
	w, err := pcapio.NewWriter(&buf, pcapio.WriterOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	add := func(ch *seal.Channel, l3 *encap.L3, f *encap.Fields, tlps [][]byte, body []byte, handshake bool) {
		var frame []byte
		switch {
		case tlps != nil && l3 == nil:
			frame, err = encap.AppendDxpuEth(nil, l2, f, tlps)
		case tlps != nil:
			frame, err = encap.AppendDxpuUDP(nil, l2, l3, f, tlps)
		default:
			frame, err = encap.AppendDxpuMsg(nil, l2, l3, f, body)
		}
		if err != nil {
			tb.Fatal(err)
		}
		cfg := &encap.Config{}
		if l3 != nil {
			cfg.UDPPort = l3.DstPort
		}
		lay, err := encap.Walk(frame, cfg)
		if err != nil {
			tb.Fatal(err)
		}
		plain := frame[lay.Payload : lay.Payload+encap.HeaderLen+encap.Header(frame[lay.Payload:]).BodyLen()]
		var sealed []byte
		if handshake {
			sealed, err = ch.SealHandshake(nil, plain, uint64(time.Second))
		} else {
			sealed, err = ch.Seal(nil, plain)
		}
		if err != nil {
			tb.Fatal(err)
		}
		out := append(bytes.Clone(frame[:lay.Payload]), sealed...)
		if lay.Encap == encap.EncapDxpuUDP {
			fixIPv4UDP(out, lay)
		}
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(1, 0), CaptureLength: len(out), Length: len(out)}, out); err != nil {
			tb.Fatal(err)
		}
	}
	hello := make([]byte, encap.HelloLen+16)
	hello[0], hello[1], hello[2] = byte(encap.CtlHello), 1, byte(encap.RoleGPU)
	fields := &encap.Fields{PairID: 5, Seq: 9, Ack: 4, Flags: encap.FlagAck}
	add(gpu, toHost, &encap.Fields{Type: encap.MsgControl, PairID: 5}, nil, hello, true)
	add(host, toGPU, fields, [][]byte{mwr, mwr}, nil, false)
	add(host, nil, fields, [][]byte{mwr}, nil, false)
	add(gpu, toHost, &encap.Fields{Type: encap.MsgAck, PairID: 5, Ack: 11, Flags: encap.FlagAck}, nil, nil, false)
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes(), keyLog
}

// FuzzCaptureFile runs `dxpu pcap info`, `convert` (to each encapsulation,
// packed or not) and `unseal` on an arbitrary capture file. Invariants: no
// panic; every error is one non-empty line; what goes to stderr is
// bounded (at most MaxErrorLines frame lines plus a few summary lines) and
// every line says something; a capture written reads back whole, with no
// more records than the input had bytes.
func FuzzCaptureFile(f *testing.F) {
	sealed, keyLog := fuzzSealed(f)
	f.Add(sealed)
	for _, name := range []string{"dxpu-udp.pcap", "dxpu-eth-vlan.pcap", "dxpu-udp-vlan.pcapng", "nettlp-vlan-snap128.pcap", "mix.pcap"} {
		if b, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "pcap", name)); err == nil {
			f.Add(b[:min(len(b), 2048)])
		}
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		in, kl := filepath.Join(dir, "in.pcap"), filepath.Join(dir, "keys.log")
		if err := os.WriteFile(in, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(kl, keyLog, 0o600); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		check := func(what string, err error, stdout, stderr *bytes.Buffer, out string) {
			if err != nil {
				if msg := err.Error(); msg == "" || strings.ContainsAny(msg, "\r\n") {
					t.Fatalf("%s: error is not one line: %q", what, msg)
				}
			}
			lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
			if stderr.Len() > 0 && len(lines) > MaxErrorLines+maxReasons+2 {
				t.Fatalf("%s: %d lines on stderr", what, len(lines))
			}
			for _, l := range lines {
				if stderr.Len() > 0 && strings.TrimSpace(l) == "" {
					t.Fatalf("%s: empty line on stderr:\n%s", what, stderr)
				}
			}
			if out == "" {
				return
			}
			if _, serr := os.Stat(out); serr != nil {
				return // not written
			}
			r, err := pcapio.Open(out)
			if err != nil {
				t.Fatalf("%s: output does not open: %v", what, err)
			}
			defer r.Close()
			for n := 0; ; n++ {
				if n > len(data) {
					t.Fatalf("%s: more than %d records from %d bytes", what, n, len(data))
				}
				_, _, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("%s: output record %d: %v", what, n, err)
				}
			}
			os.Remove(out)
		}
		var stdout, stderr bytes.Buffer
		err := Info([]string{in}, encap.DefaultUDPPort, false, &stdout, &stderr)
		check("info", err, &stdout, &stderr, "")
		for _, c := range []struct {
			to   string
			pack bool
			vlan int
		}{{"dxpu-udp", false, -1}, {"nettlp", false, 0}, {"dxpu-eth", true, 7}} {
			stdout.Reset()
			stderr.Reset()
			out := filepath.Join(dir, "out-"+c.to+".pcap")
			o := ConvertOptions{In: in, Out: out, To: c.to, VLAN: c.vlan, Pair: 1, UDPPort: encap.DefaultUDPPort,
				SrcIP: "10.0.0.1", DstIP: "10.0.0.2", MTU: encap.DefaultMTU, Pack: c.pack}
			err := Convert(ctx, o, &stdout, &stderr)
			check("convert to "+c.to, err, &stdout, &stderr, out)
		}
		stdout.Reset()
		stderr.Reset()
		out := filepath.Join(dir, "plain.pcap")
		err = Unseal(UnsealOptions{In: in, Out: out, KeyLog: kl, UDPPort: encap.DefaultUDPPort}, &stdout, &stderr)
		check("unseal", err, &stdout, &stderr, out)
	})
}
