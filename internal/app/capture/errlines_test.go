package capture

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// writeFrames writes n copies of frame to a capture of link type lt.
func writeFrames(t *testing.T, path string, lt layers.LinkType, n int, frame []byte) {
	t.Helper()
	w, err := pcapio.Create(path, pcapio.WriterOptions{LinkType: lt})
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := w.WritePacket(gopacket.CaptureInfo{}, frame); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestBadFramesReportBounded: info and convert report the first
// MaxErrorLines bad frames one by one, then one line counting the rest.
func TestBadFramesReportBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "bad.pcap")
	const n = 3 * MaxErrorLines
	writeFrames(t, in, layers.LinkTypeEthernet, n, []byte{0xde, 0xad, 0xbe})
	for name, run := range map[string]func(stdout, stderr *bytes.Buffer) error{
		"info": func(stdout, stderr *bytes.Buffer) error { return Info([]string{in}, 8855, false, stdout, stderr) },
		"convert": func(stdout, stderr *bytes.Buffer) error {
			return Convert(t.Context(), convertTo(in, filepath.Join(dir, "out.pcap"), "dxpu-eth"), stdout, stderr)
		},
	} {
		var stdout, stderr bytes.Buffer
		err := run(&stdout, &stderr)
		if !errors.Is(err, apperr.ErrFailed) || !strings.Contains(err.Error(), fmt.Sprint(n)) {
			t.Errorf("%s: %v, want a failure counting %d frames", name, err, n)
		}
		lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
		if len(lines) != MaxErrorLines+1 {
			t.Fatalf("%s: %d lines on stderr, want %d and a count", name, len(lines), MaxErrorLines)
		}
		if !strings.Contains(lines[0], "frame 1: ") || !strings.Contains(lines[MaxErrorLines-1], fmt.Sprintf("frame %d: ", MaxErrorLines)) {
			t.Errorf("%s: first lines %q ... %q", name, lines[0], lines[MaxErrorLines-1])
		}
		if want := fmt.Sprintf("%d more frames that did not ", n-MaxErrorLines); !strings.HasPrefix(lines[MaxErrorLines], want) {
			t.Errorf("%s: last line %q, want it to start %q", name, lines[MaxErrorLines], want)
		}
	}
}

// TestOtherLinkTypeRefused: a capture of another link layer is bad input
// (exit status 1), named with its link type, with nothing on stdout.
func TestOtherLinkTypeRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "raw.pcap")
	writeFrames(t, in, layers.LinkTypeRaw, 1, make([]byte, 20))
	out := filepath.Join(dir, "out.pcap")
	for name, run := range map[string]func(stdout, stderr *bytes.Buffer) error{
		"info": func(stdout, stderr *bytes.Buffer) error { return Info([]string{in}, 8855, false, stdout, stderr) },
		"convert": func(stdout, stderr *bytes.Buffer) error {
			return Convert(t.Context(), convertTo(in, out, "dxpu-eth"), stdout, stderr)
		},
	} {
		var stdout, stderr bytes.Buffer
		err := run(&stdout, &stderr)
		if !errors.Is(err, apperr.ErrFailed) || !errors.Is(err, pcapio.ErrLinkType) || !strings.Contains(err.Error(), in+": unsupported link type Raw") {
			t.Errorf("%s: %v, want a failure naming %s and its link type", name, err, in)
		}
		if stdout.Len()+stderr.Len() > 0 {
			t.Errorf("%s printed %q %q", name, stdout.String(), stderr.String())
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("convert wrote %s: %v", out, err)
	}
}

// TestZeroFilledCaptureFailsAtOnce: zeros after a capture header are not a
// million empty frames to report one by one: the first record fails, with
// one error naming the file.
func TestZeroFilledCaptureFailsAtOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "zeros.pcap")
	writeFrames(t, in, layers.LinkTypeEthernet, 0, nil)
	f, _ := os.OpenFile(in, os.O_APPEND|os.O_WRONLY, 0)
	f.Write(make([]byte, 1<<20))
	f.Close()
	for name, run := range map[string]func(stdout, stderr *bytes.Buffer) error{
		"info": func(stdout, stderr *bytes.Buffer) error { return Info([]string{in}, 8855, false, stdout, stderr) },
		"convert": func(stdout, stderr *bytes.Buffer) error {
			return Convert(t.Context(), convertTo(in, filepath.Join(dir, "out.pcap"), "dxpu-eth"), stdout, stderr)
		},
	} {
		var stdout, stderr bytes.Buffer
		err := run(&stdout, &stderr)
		if !errors.Is(err, pcapio.ErrCorrupt) || !strings.HasPrefix(err.Error(), in+": ") || !strings.Contains(err.Error(), "record 1: ") {
			t.Errorf("%s: %v, want the first record of %s refused", name, err, in)
		}
		if stdout.Len()+stderr.Len() > 0 {
			t.Errorf("%s printed %q %q", name, stdout.String(), stderr.String())
		}
	}
}
