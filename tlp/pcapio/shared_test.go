package pcapio_test

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// TestSharedCaptures reads every NetTLP capture and checks the record
// count and lengths against an independent walk of the file's record
// headers, and that the nanosecond magic is recognised.
func TestSharedCaptures(t *testing.T) {
	t.Parallel()
	// Only classic pcap: the independent walk below reads pcap records.
	files := privtest.SharedFiles(t, privtest.SharedDir(t, "testdata", "nettlp"), ".pcap")
	nanos := 0
	for _, path := range files {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		magic := binary.LittleEndian.Uint32(raw)
		var lens [][2]int
		for off := 24; off+16 <= len(raw); {
			incl := int(binary.LittleEndian.Uint32(raw[off+8:]))
			orig := int(binary.LittleEndian.Uint32(raw[off+12:]))
			lens = append(lens, [2]int{incl, orig})
			off += 16 + incl
		}
		r, err := pcapio.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if r.Nanos() != (magic == 0xa1b23c4d) {
			t.Errorf("%s: magic %#x read as nanos=%v", path, magic, r.Nanos())
		}
		if r.Nanos() {
			nanos++
		}
		for i := 0; ; i++ {
			data, ci, err := r.Next()
			if errors.Is(err, io.EOF) {
				if i != len(lens) {
					t.Errorf("%s: %d records, the file holds %d", path, i, len(lens))
				}
				break
			}
			if err != nil {
				t.Fatalf("%s record %d: %v", path, i+1, err)
			}
			if i >= len(lens) || len(data) != lens[i][0] || ci.Length != lens[i][1] {
				t.Fatalf("%s record %d: %d/%d bytes", path, i+1, len(data), ci.Length)
			}
		}
		r.Close()
	}
	if nanos == 0 {
		t.Error("no nanosecond capture among the shared files")
	}
}
