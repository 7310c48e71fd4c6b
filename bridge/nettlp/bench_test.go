package nettlp

import (
	"context"
	"net/netip"
	"testing"

	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/tlp"
)

func benchCompleter(b *testing.B, req []byte, cfg CompleterConfig) {
	mem := newTestMemory(b, 0, 1<<20)
	mem.WriteAt(make([]byte, 1<<16), 0) // allocate the pages read
	c, err := NewCompleter(cfg, mem, HeaderLen, nil)
	if err != nil {
		b.Fatal(err)
	}
	bytesOut := 0
	emit := func(f []byte) error { bytesOut += len(f); return nil }
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := c.Handle(req, emit); err != nil {
			b.Fatal(err)
		}
	}
	if bytesOut == 0 {
		bytesOut = len(req) * b.N // a write: count what came in
	}
	b.SetBytes(int64(bytesOut / b.N))
}

// BenchmarkCompleterRead256: a 256-byte MRd answered by one CplD.
func BenchmarkCompleterRead256(b *testing.B) {
	benchCompleter(b, libtlpMRd(0x1000, 256, 1), CompleterConfig{})
}

// BenchmarkCompleterRead4096: a 4 KiB MRd answered by 16 CplDs of 256 bytes.
func BenchmarkCompleterRead4096(b *testing.B) {
	benchCompleter(b, libtlpMRd(0x2000, 4096, 1), CompleterConfig{})
}

// BenchmarkCompleterWrite256: a 256-byte MWr stored in memory.
func BenchmarkCompleterWrite256(b *testing.B) {
	d := appendLibtlpWrite(nil, 0x3000, make([]byte, 256), 1, 0)
	benchCompleter(b, d[HeaderLen:], CompleterConfig{})
}

// BenchmarkMemoryCopy256 is the baseline: copying 256 bytes out of the
// same sparse memory, no TLP work.
func BenchmarkMemoryCopy256(b *testing.B) {
	mem := newTestMemory(b, 0, 1<<20)
	mem.WriteAt(make([]byte, 1<<16), 0)
	p := make([]byte, 256)
	b.ReportAllocs()
	b.SetBytes(256)
	for range b.N {
		mem.ReadAt(p, 0x1000)
	}
}

// BenchmarkLoopbackRead256: libtlp's dma_read of 256 bytes against a Target
// over UDP on loopback (one request, one CplD, round trip).
func BenchmarkLoopbackRead256(b *testing.B) {
	privtest.Loopback(b)
	mem := newTestMemory(b, 0, 1<<20)
	tg, err := NewTarget(TargetConfig{Addr: netip.MustParseAddr("127.0.0.2"), Tags: 1}, mem)
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	ctx, cancel := contextWithCancel()
	go func() { tg.Serve(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	c, err := Dial(netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2"), 0, tlp.NewID(0x1b, 0, 0))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	p := make([]byte, 256)
	b.ReportAllocs()
	b.SetBytes(256)
	b.ResetTimer()
	for range b.N {
		if n, err := c.Read(0x1000, p); err != nil || n != 256 {
			b.Fatal(n, err)
		}
	}
}

func contextWithCancel() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}
