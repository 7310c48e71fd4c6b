package pcapio_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/gopacket"

	"github.com/dxpu/dxpu/tlp/pcapio"
)

// FuzzPcapReader reads arbitrary bytes as a capture. Invariants: no panic;
// every record has len(data) == CaptureLength <= min(Length, MaxSnaplen)
// for pcapng; errors are sticky; reading ends; and the records read,
// written out again in each format, read back identical.
func FuzzPcapReader(f *testing.F) {
	for _, opt := range []pcapio.WriterOptions{{}, {Nanos: true}, {PcapNG: true}} {
		var buf bytes.Buffer
		w, _ := pcapio.NewWriter(&buf, opt)
		for i, fr := range frames()[:3] {
			w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(int64(i), 5000), CaptureLength: len(fr), Length: len(fr) + i}, fr)
		}
		w.Close()
		f.Add(buf.Bytes())
	}
	f.Add([]byte{0x0a, 0x0d, 0x0d, 0x0a})
	for _, p := range []string{
		filepath.Join("..", "..", "testdata", "pcap", "dxpu-udp-vlan.pcapng"),
		filepath.Join("..", "..", "testdata", "pcap", "nettlp-vlan-snap128.pcap"),
	} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b[:min(len(b), 1024)])
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := pcapio.NewReader(bytes.NewReader(in))
		if err != nil {
			if r != nil {
				t.Fatal("reader returned with an error")
			}
			return
		}
		type rec struct {
			data []byte
			ci   gopacket.CaptureInfo
		}
		var recs []rec
		for i := 0; ; i++ {
			if i > 1<<20 {
				t.Fatal("reader does not end")
			}
			data, ci, err := r.Next()
			if err != nil {
				if _, _, err2 := r.Next(); err2 == nil || err2.Error() != err.Error() {
					t.Fatalf("error not sticky: %v then %v", err, err2)
				}
				break
			}
			if len(data) != ci.CaptureLength || len(data) > pcapio.MaxSnaplen {
				t.Fatalf("record %d: %d bytes, capture length %d", i, len(data), ci.CaptureLength)
			}
			recs = append(recs, rec{data, ci})
		}
		for _, opt := range []pcapio.WriterOptions{{Nanos: true}, {PcapNG: true, Nanos: true}} {
			var out bytes.Buffer
			w, err := pcapio.NewWriter(&out, opt)
			if err != nil {
				t.Fatal(err)
			}
			for _, rc := range recs {
				ci := rc.ci
				ci.Timestamp = time.Unix(0, 0)
				if ci.Length < ci.CaptureLength {
					ci.Length = ci.CaptureLength
				}
				if err := w.WritePacket(ci, rc.data); err != nil {
					t.Fatal(err)
				}
			}
			w.Close()
			r2, err := pcapio.NewReader(&out)
			if err != nil {
				t.Fatal(err)
			}
			for i, rc := range recs {
				data, _, err := r2.Next()
				if err != nil || !bytes.Equal(data, rc.data) {
					t.Fatalf("%+v: record %d re-read: %v", opt, i, err)
				}
			}
			if _, _, err := r2.Next(); !errors.Is(err, io.EOF) {
				t.Fatalf("%+v: extra records: %v", opt, err)
			}
		}
	})
}
