package nettlp

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/internal/privtest"
)

// TestRealLibtlpApps runs NetTLP's own dma_write and dma_read tools (built
// from the public NetTLP/libtlp repository) against a Target on loopback.
// Point DXPU_LIBTLP_APPS at the directory holding the built apps; without
// it the test is skipped (libtlp is not packaged for apt).
func TestRealLibtlpApps(t *testing.T) {
	dir := privtest.OptIn(t, "DXPU_LIBTLP_APPS", "build NetTLP/libtlp and point it at libtlp/apps")
	dmaRead, dmaWrite := filepath.Join(dir, "dma_read"), filepath.Join(dir, "dma_write")
	for _, p := range []string{dmaRead, dmaWrite} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("DXPU_LIBTLP_APPS=%s: %v", dir, err)
		}
	}
	mem := newTestMemory(t, 0, 1<<33)
	startTarget(t, targetAddr, mem, CompleterConfig{})
	returns := regexp.MustCompile(`returns (-?\d+)`)
	run := func(args ...string) string {
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	cases := []struct {
		addr      uint64
		payload   string
		mps, mrrs int
	}{
		{0x1000, "dxpu", 0, 0},
		{0x1001, "x", 0, 0},
		{0x2002, "hello, libtlp", 0, 0},
		{0x3003, strings.Repeat("0123456789abcdef", 8), 0, 0},
		{0x4ff1, strings.Repeat("crossing 4 KiB ", 20), 256, 128},
		{0x6000, strings.Repeat("aligned mps 256 ", 200), 256, 512},
		{0x1_0000_2000, strings.Repeat("above 4 GiB ", 30), 256, 256},
	}
	for i, tc := range cases {
		tag := fmt.Sprint(i % MaxTags)
		addr := fmt.Sprintf("%#x", tc.addr)
		size := fmt.Sprint(len(tc.payload))
		w := []string{dmaWrite, "-r", "127.0.0.2", "-l", "127.0.0.1", "-b", "1b:00", "-t", tag, "-a", addr, "-s", size, "-p", tc.payload}
		if tc.mps > 0 {
			w = append(w, "-m", fmt.Sprint(tc.mps))
		}
		run(w...)
		r := []string{dmaRead, "-r", "127.0.0.2", "-l", "127.0.0.1", "-b", "1b:00", "-t", tag, "-a", addr, "-s", size}
		if tc.mrrs > 0 {
			r = append(r, "-m", fmt.Sprint(tc.mrrs))
		}
		// The write and the read use the same tag port, so the target
		// serves the read after the write.
		out := run(r...)
		m := returns.FindStringSubmatch(out)
		if m == nil || (tc.mrrs == 0 && m[1] != size) {
			t.Fatalf("case %d: dma_read says %v:\n%s", i, m, out)
		}
		got := make([]byte, len(tc.payload))
		mem.ReadAt(got, tc.addr)
		if string(got) != tc.payload {
			t.Fatalf("case %d: memory at %s holds %q after dma_write of %q", i, addr, got, tc.payload)
		}
		dump := hexdumpBytes(out)
		if !bytes.HasPrefix(dump, []byte(tc.payload)) {
			t.Fatalf("case %d: dma_read dumped %q, want %q", i, dump, tc.payload)
		}
	}
}

// hexdumpBytes extracts the bytes of libtlp's "Hex dump" section.
func hexdumpBytes(out string) []byte {
	_, after, ok := strings.Cut(out, "Hex dump")
	if !ok {
		return nil
	}
	hexPart, _, _ := strings.Cut(after, "ASCII dump")
	var b []byte
	for _, f := range strings.Fields(hexPart) {
		d, err := hex.DecodeString(f)
		if err != nil {
			break
		}
		b = append(b, d...)
	}
	return b
}
