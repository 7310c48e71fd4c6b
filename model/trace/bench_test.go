package trace

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/privtest"
)

func benchDecode(b *testing.B, data []byte) {
	b.Helper()
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	var events int64
	cpu0 := cpuTime()
	for b.Loop() {
		w, err := Decode(bytes.NewReader(data))
		if err != nil {
			b.Fatal(err)
		}
		events += w.Events
	}
	reportRates(b, events, cpu0)
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportRates reports events per wall second and per CPU second; the
// latter holds still on a machine that other jobs keep busy.
func reportRates(b *testing.B, events int64, cpu0 time.Duration) {
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(events)/cpu.Seconds(), "events/cpu-s")
	}
}

// noopEvent is the cheapest thing encoding/json can decode an event into.
type noopEvent struct{}

func (*noopEvent) UnmarshalJSON([]byte) error { return nil }

// benchEncodingJSON frames the same events with encoding/json's Decoder
// (Token to reach traceEvents, Decode per event into a no-op Unmarshaler):
// the baseline the hand-written scanner is measured against.
func benchEncodingJSON(b *testing.B, data []byte) {
	b.Helper()
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	var events int64
	cpu0 := cpuTime()
	for b.Loop() {
		dec := json.NewDecoder(bytes.NewReader(data))
		for {
			tok, err := dec.Token()
			if err != nil {
				b.Fatal(err)
			}
			if tok == "traceEvents" {
				break
			}
		}
		dec.Token()
		var e noopEvent
		for dec.More() {
			if err := dec.Decode(&e); err != nil {
				b.Fatal(err)
			}
			events++
		}
	}
	reportRates(b, events, cpu0)
}

func syntheticData(b *testing.B) []byte {
	var buf bytes.Buffer
	if err := writeSynthetic(&buf, 100_000); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

func BenchmarkDecodeSynthetic(b *testing.B) { benchDecode(b, syntheticData(b)) }

func BenchmarkEncodingJSONSynthetic(b *testing.B) { benchEncodingJSON(b, syntheticData(b)) }

// BenchmarkDecodeShared decodes each ../shared trace from memory,
// decompressed (json) and as stored (gzip), beside the encoding/json baseline.
func BenchmarkDecodeShared(b *testing.B) {
	for _, p := range privtest.Traces(b) {
		gz, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			b.Fatal(err)
		}
		plain, err := io.ReadAll(zr)
		if err != nil {
			b.Fatal(err)
		}
		if len(plain) < 1<<20 {
			continue // too small to say anything about speed
		}
		name := TraceName(p)
		b.Run(name+"/json", func(b *testing.B) { benchDecode(b, plain) })
		b.Run(name+"/gzip", func(b *testing.B) { benchDecode(b, gz) })
		b.Run(name+"/encoding-json", func(b *testing.B) { benchEncodingJSON(b, plain) })
	}
}
