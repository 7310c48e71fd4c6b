package switchreplay

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

var testdata = filepath.Join("..", "..", "..", "testdata")

// corpusOptions replays pcap as testdata/switch/regen.sh does.
func corpusOptions(pcap, out, expect string) Options {
	return Options{Pcap: pcap, Table: filepath.Join(testdata, "switch", "corpus-table.json"), Mode: "go",
		Out: out, Expect: expect, Port: "host", UDPPort: 8855,
		PortAddrs: []string{"host=02:5e:00:00:00:01/10.255.0.1", "gpu=02:5e:00:00:00:02/10.255.0.2"}}
}

func run(o Options) (string, error) {
	var buf bytes.Buffer
	err := Run(o, &buf)
	return buf.String(), err
}

// TestMatchesExpected replays the corpus through the Go path and checks
// the committed expected outputs, and that a wrong expectation fails.
func TestMatchesExpected(t *testing.T) {
	t.Parallel()
	caps, _ := filepath.Glob(filepath.Join(testdata, "pcap", "*.pcap*"))
	if len(caps) == 0 {
		t.Fatal("the committed replay corpus testdata/pcap is missing")
	}
	for _, c := range caps {
		exp := filepath.Join(testdata, "switch", "expected", filepath.Base(c)+".out.pcap")
		out, err := run(corpusOptions(c, filepath.Join(t.TempDir(), "out.pcap"), exp))
		if err != nil {
			t.Fatalf("%s: %v\n%s", c, err, out)
		}
		if !strings.Contains(out, "output matches") {
			t.Fatalf("%s: %s", c, out)
		}
	}
	// Expecting another capture's output must fail.
	_, err := run(corpusOptions(filepath.Join(testdata, "pcap", "dxpu-eth.pcap"), "", filepath.Join(testdata, "switch", "expected", "dxpu-udp.pcap.out.pcap")))
	if !errors.Is(err, apperr.ErrFailed) || !strings.Contains(err.Error(), "differs") {
		t.Fatalf("mismatch: %v", err)
	}
}

func TestBadOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, mode, addr, want string }{
		{"mode", "ebpf", "", "--mode"},
		{"port-addr", "go", "nosuch=02:00:00:00:00:01", "--port-addr"},
		{"port-addr-ip", "go", "host=02:00:00:00:00:01/::1", "IPv4"},
	} {
		o := Options{Pcap: "x.pcap", Table: filepath.Join(testdata, "switch", "corpus-table.json"), Mode: tc.mode}
		if tc.addr != "" {
			o.PortAddrs = []string{tc.addr}
		}
		_, err := run(o)
		if !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// writeCapture writes n copies of frame to a gzipped capture of link type lt.
func writeCapture(t *testing.T, path string, lt layers.LinkType, n int, frame []byte) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	w, err := pcapio.NewWriter(zw, pcapio.WriterOptions{LinkType: lt})
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := w.WritePacket(gopacket.CaptureInfo{}, frame); err != nil {
			t.Fatal(err)
		}
	}
	if err := errors.Join(w.Close(), zw.Close(), f.Close()); err != nil {
		t.Fatal(err)
	}
}

// TestReplayStreams: the capture is switched record by record. Replaying
// 100 MB of frames (a 100 KB gzip) with --out and --expect allocates a
// small part of that, where loading the records allocated it all (twice).
func TestReplayStreams(t *testing.T) {
	// Not parallel: it measures the process's allocations.
	dir := t.TempDir()
	in := filepath.Join(dir, "big.pcap.gz")
	const n, size = 100_000, 1000
	frame := make([]byte, size) // dropped by the switch: broadcast MACs, EtherType 0
	copy(frame, bytes.Repeat([]byte{0xff}, 12))
	writeCapture(t, in, layers.LinkTypeEthernet, n, frame)
	// Forwarded frames compare with the corpus output (first frames only).
	o := corpusOptions(in, filepath.Join(dir, "out.pcap"), filepath.Join(testdata, "switch", "expected", "dxpu-eth.pcap.out.pcap"))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	out, err := run(o)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, apperr.ErrFailed) || !strings.Contains(err.Error(), "0 frames forwarded") {
		t.Fatalf("replay: %v\n%s", err, out)
	}
	if want := fmt.Sprintf("%s: %d frames, 0 forwarded", in, n); !strings.Contains(out, want) {
		t.Fatalf("output %q, want %q", out, want)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > n*size/10 {
		t.Errorf("replaying %d bytes of frames allocated %d bytes", n*size, alloc)
	} else {
		t.Logf("replaying %d bytes of frames allocated %d bytes", n*size, alloc)
	}
}

// TestReplayRefusesOtherLinkTypes: a capture of another link layer is bad
// input named with its link type; nothing is printed or written.
func TestReplayRefusesOtherLinkTypes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "raw.pcap.gz")
	writeCapture(t, in, layers.LinkTypeRaw, 3, make([]byte, 60))
	o := corpusOptions(in, filepath.Join(dir, "out.pcap"), "")
	out, err := run(o)
	if !errors.Is(err, apperr.ErrFailed) || !errors.Is(err, pcapio.ErrLinkType) || !strings.Contains(err.Error(), in+": unsupported link type Raw") {
		t.Fatalf("replay: %v, want a failure naming %s and its link type", err, in)
	}
	if out != "" {
		t.Errorf("printed %q", out)
	}
	if _, err := os.Stat(o.Out); !os.IsNotExist(err) {
		t.Errorf("wrote %s: %v", o.Out, err)
	}
}

// TestOutKeepsWhatItReads: --out that is an input (--pcap, --table,
// --expect) is refused and the input left whole; a replay that fails
// leaves an existing --out as it was. (A failed replay deleted its --out,
// the input capture too when they were one file.)
func TestOutKeepsWhatItReads(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mix, err := os.ReadFile(filepath.Join(testdata, "pcap", "mix.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "in.pcap")
	if err := os.WriteFile(in, mix, 0o644); err != nil {
		t.Fatal(err)
	}
	o := corpusOptions(in, in, "")
	if _, err := run(o); !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), "--out "+in+" is the same file as --pcap") {
		t.Fatalf("--out = --pcap: %v", err)
	}
	o = corpusOptions(in, o.Table, "")
	if _, err := run(o); !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), "same file as --table") {
		t.Fatalf("--out = --table: %v", err)
	}
	if b, _ := os.ReadFile(in); !bytes.Equal(b, mix) {
		t.Fatal("the input capture changed")
	}
	cut, keep := filepath.Join(dir, "cut.pcap"), filepath.Join(dir, "keep.pcap")
	if err := os.WriteFile(cut, mix[:8000], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keep, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := run(corpusOptions(cut, keep, "")); err == nil {
		t.Fatal("a cut capture replayed")
	}
	if b, err := os.ReadFile(keep); err != nil || string(b) != "precious" {
		t.Fatalf("--out after a failed replay: %q, %v", b, err)
	}
	if left, _ := filepath.Glob(keep + ".tmp-*"); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}
