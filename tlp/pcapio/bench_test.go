package pcapio_test

import (
	"bytes"
	"testing"

	"github.com/google/gopacket"

	"github.com/dxpu/dxpu/tlp/pcapio"
)

func benchCapture(b *testing.B, opt pcapio.WriterOptions) []byte {
	var buf bytes.Buffer
	w, _ := pcapio.NewWriter(&buf, opt)
	frame := make([]byte, 128)
	for i := 0; i < 1000; i++ {
		w.WritePacket(gopacket.CaptureInfo{CaptureLength: len(frame), Length: len(frame)}, frame)
	}
	w.Close()
	return buf.Bytes()
}

// BenchmarkRead reads 1000 records of 128 bytes per op.
func BenchmarkRead(b *testing.B) {
	for _, c := range []struct {
		name string
		opt  pcapio.WriterOptions
	}{{"pcap", pcapio.WriterOptions{Nanos: true}}, {"pcapng", pcapio.WriterOptions{PcapNG: true}}} {
		raw := benchCapture(b, c.opt)
		b.Run(c.name+"/ZeroCopy", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				r, _ := pcapio.NewReader(bytes.NewReader(raw))
				for {
					if _, _, err := r.ZeroCopyReadPacketData(); err != nil {
						break
					}
				}
			}
		})
	}
}

// BenchmarkWrite writes one 128-byte record per op.
func BenchmarkWrite(b *testing.B) {
	for _, c := range []struct {
		name string
		opt  pcapio.WriterOptions
	}{{"pcap", pcapio.WriterOptions{}}, {"pcapng", pcapio.WriterOptions{PcapNG: true}}} {
		b.Run(c.name, func(b *testing.B) {
			var buf bytes.Buffer
			w, _ := pcapio.NewWriter(&buf, c.opt)
			frame := make([]byte, 128)
			ci := gopacket.CaptureInfo{CaptureLength: 128, Length: 128}
			b.ReportAllocs()
			for b.Loop() {
				if buf.Len() > 1<<20 {
					buf.Reset()
				}
				w.WritePacket(ci, frame)
			}
		})
	}
}
