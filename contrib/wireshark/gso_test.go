package wireshark

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/gopacket"

	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// TestGSOSuperDatagram: a UDP segmentation-offload send captured before
// segmentation (tcpdump on the sending host) holds several dxpu datagrams
// back to back in one UDP payload. The dissector shows each datagram, on
// the dxpu port and to another port (the heuristic), with a note saying
// what the datagram is; a payload whose headers do not chain exactly stays
// a body-length error.
func TestGSOSuperDatagram(t *testing.T) {
	t.Parallel()
	mwr := mustTLP(t, tlp.Packet{Kind: tlp.MWr, RequesterID: 0x0100, FirstBE: 0xf, LastBE: 0xf, Address: 0x1000,
		Data: make([]byte, 64)})
	mrd := mustTLP(t, tlp.Packet{Kind: tlp.MRd, Length: 1, RequesterID: 0x0100, Tag: 3, FirstBE: 0xf, Address: 0x2000})
	datagram := func(seq uint32, tlps ...[]byte) []byte {
		f := &encap.Fields{PairID: 7, Seq: seq}
		b, err := encap.AppendDxpuUDP(nil, l2, l3, f, tlps)
		if err != nil {
			t.Fatal(err)
		}
		return b[udpHdr:]
	}
	// glue puts payloads behind the headers of the first as one datagram.
	glue := func(dstPort uint16, payloads ...[]byte) []byte {
		a := *l3
		a.DstPort = dstPort
		b, err := encap.AppendDxpuUDP(nil, l2, &a, &encap.Fields{PairID: 7}, nil)
		if err != nil {
			t.Fatal(err)
		}
		b = b[:udpHdr]
		for _, p := range payloads {
			b = append(b, p...)
		}
		binary.BigEndian.PutUint16(b[ethHdr+2:], uint16(len(b)-ethHdr))
		binary.BigEndian.PutUint16(b[udpHdr-4:], uint16(len(b)-udpHdr+encap.UDPHeaderLen))
		b[ethHdr+10], b[ethHdr+11] = 0, 0 // the IPv4 checksum, unverified by tshark
		binary.BigEndian.PutUint16(b[udpHdr-2:], 0)
		return b
	}
	full := datagram(1, mwr, mwr)
	last := datagram(3, mrd)
	frames := [][]byte{
		glue(encap.DefaultUDPPort, full, datagram(2, mwr, mwr), last), // on the dxpu port
		glue(9999, full, datagram(2, mwr, mwr)),                       // the heuristic
		glue(encap.DefaultUDPPort, full, last[:len(last)-1]),          // the chain does not fill it
	}
	path := filepath.Join(t.TempDir(), "gso.pcap")
	w, err := pcapio.Create(path, pcapio.WriterOptions{Nanos: true})
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
	shown := dissect(t, tsharkPath(t), path)
	if len(shown) != len(frames) {
		t.Fatalf("tshark shows %d frames, want %d", len(shown), len(frames))
	}
	for i, want := range []struct {
		seqs    []float64
		experts []string
	}{
		{[]float64{1, 2, 3}, []string{"dxpu.expert.gso"}},
		{[]float64{1, 2}, []string{"dxpu.expert.gso"}},
		{[]float64{1}, []string{"dxpu.expert.body_len"}},
	} {
		var seqs []float64
		for _, l := range asList(shown[i]["dxpu"]) {
			m, _ := l.(map[string]any)
			if s, ok := flatten(m, stopNone)["dxpu.seq"]; ok {
				v, _ := strconv.ParseFloat(fmt.Sprint(s), 64)
				seqs = append(seqs, v)
			}
		}
		got := experts(shown[i], stopNone)
		if !slices.Equal(seqs, want.seqs) || !slices.Equal(got, want.experts) || hasKey(shown[i], "_ws.lua.error") {
			t.Errorf("frame %d: dxpu datagrams with seq %v, experts %v; want %v, %v", i+1, seqs, got, want.seqs, want.experts)
		}
	}
}
