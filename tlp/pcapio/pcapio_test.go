package pcapio_test

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/dxpu/dxpu/tlp/pcapio"
)

func frames() [][]byte {
	var out [][]byte
	for i := 0; i < 5; i++ {
		f := make([]byte, 60+i*37)
		for j := range f {
			f[j] = byte(i*7 + j)
		}
		out = append(out, f)
	}
	return out
}

// TestRoundTrip writes frames in each format and resolution and reads them
// back: same bytes, same lengths, timestamps at the written resolution.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	base := time.Unix(1700000000, 123456789).UTC()
	for _, opt := range []pcapio.WriterOptions{
		{}, {Nanos: true}, {PcapNG: true}, {PcapNG: true, Nanos: true}, {Snaplen: 100},
	} {
		var buf bytes.Buffer
		w, err := pcapio.NewWriter(&buf, opt)
		if err != nil {
			t.Fatal(err)
		}
		in := frames()
		for i, f := range in {
			ci := gopacket.CaptureInfo{Timestamp: base.Add(time.Duration(i) * 1001 * time.Nanosecond), CaptureLength: len(f), Length: len(f)}
			if err := w.WritePacket(ci, f); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := pcapio.NewReader(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatalf("%+v: %v", opt, err)
		}
		wantFormat := pcapio.FormatPcap
		if opt.PcapNG {
			wantFormat = pcapio.FormatPcapNG
		}
		if r.Format() != wantFormat || r.Nanos() != (opt.Nanos || opt.PcapNG) {
			t.Errorf("%+v: read as %v nanos=%v", opt, r.Format(), r.Nanos())
		}
		for i, f := range in {
			data, ci, err := r.Next()
			if err != nil {
				t.Fatalf("%+v record %d: %v", opt, i, err)
			}
			want := f
			if opt.Snaplen != 0 && len(want) > int(opt.Snaplen) {
				want = want[:opt.Snaplen]
			}
			if !bytes.Equal(data, want) || ci.Length != len(f) || ci.CaptureLength != len(want) {
				t.Errorf("%+v record %d: got %d/%d bytes, want %d/%d", opt, i, ci.CaptureLength, ci.Length, len(want), len(f))
			}
			ts := base.Add(time.Duration(i) * 1001 * time.Nanosecond)
			if !opt.Nanos {
				ts = ts.Truncate(time.Microsecond)
			}
			if !ci.Timestamp.Equal(ts) {
				t.Errorf("%+v record %d: timestamp %v, want %v", opt, i, ci.Timestamp, ts)
			}
		}
		if _, _, err := r.Next(); err != io.EOF {
			t.Errorf("%+v: after the last record got %v, want io.EOF", opt, err)
		}
	}
}

// TestGzip reads a gzip-compressed pcapng.
func TestGzip(t *testing.T) {
	t.Parallel()
	var raw bytes.Buffer
	w, _ := pcapio.NewWriter(&raw, pcapio.WriterOptions{PcapNG: true})
	w.WritePacket(gopacket.CaptureInfo{CaptureLength: 60, Length: 60}, make([]byte, 60))
	w.Close()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw.Bytes())
	zw.Close()
	r, err := pcapio.NewReader(&gz)
	if err != nil {
		t.Fatal(err)
	}
	if d, _, err := r.Next(); err != nil || len(d) != 60 {
		t.Fatalf("got %d bytes, %v", len(d), err)
	}
}

// TestBadInput checks that malformed captures give errors that say what and
// where, never a panic or a huge allocation.
func TestBadInput(t *testing.T) {
	t.Parallel()
	var good bytes.Buffer
	w, _ := pcapio.NewWriter(&good, pcapio.WriterOptions{})
	w.WritePacket(gopacket.CaptureInfo{CaptureLength: 60, Length: 60}, make([]byte, 60))
	w.Close()
	var ng bytes.Buffer
	w, _ = pcapio.NewWriter(&ng, pcapio.WriterOptions{PcapNG: true})
	w.WritePacket(gopacket.CaptureInfo{CaptureLength: 60, Length: 60}, make([]byte, 60))
	w.Close()
	ngb := ng.Bytes()
	// locate the EPB (type 6) to corrupt its captured length
	epb := ngBlock(t, ngb, 6)

	cases := []struct {
		name string
		in   []byte
		open error // expected error from NewReader
		next error // expected error from Next
	}{
		{"empty", nil, pcapio.ErrFormat, nil},
		{"bad magic", []byte("hello world, not a capture file"), pcapio.ErrFormat, nil},
		{"cut header", good.Bytes()[:10], pcapio.ErrCorrupt, nil},
		{"cut record", good.Bytes()[:24+16+30], nil, io.ErrUnexpectedEOF},
		{"huge caplen", patch(good.Bytes(), 24+8, 0xff, 0xff, 0xff, 0x7f), nil, pcapio.ErrCorrupt},
		{"ng huge caplen", patch(ngb, epb+20, 0xff, 0xff, 0xff, 0x7f), nil, pcapio.ErrCorrupt},
		{"ng huge block", patch(ngb, epb+4, 0xf0, 0xff, 0xff, 0x7f), nil, pcapio.ErrCorrupt},
		{"ng cut", ngb[:len(ngb)-10], nil, io.ErrUnexpectedEOF},
		// A zero-filled stretch is not millions of empty records.
		{"zeros after the header", append(good.Bytes()[:24:24], make([]byte, 1<<20)...), nil, pcapio.ErrCorrupt},
		{"zeros", make([]byte, 1<<20), pcapio.ErrFormat, nil},
		{"gzip of zeros", gzipOf(make([]byte, 1<<20)), pcapio.ErrFormat, nil},
	}
	for _, c := range cases {
		r, err := pcapio.NewReader(bytes.NewReader(c.in))
		if c.open != nil {
			if !errors.Is(err, c.open) {
				t.Errorf("%s: NewReader error %v, want %v", c.name, err, c.open)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: NewReader: %v", c.name, err)
			continue
		}
		_, _, err = r.Next()
		if !errors.Is(err, c.next) {
			t.Errorf("%s: Next error %v, want %v", c.name, err, c.next)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
}

func gzipOf(b []byte) []byte {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(b)
	zw.Close()
	return gz.Bytes()
}

// TestEmptyRecords: a record of original length 0 is refused (no frame is
// empty on the wire); a record that keeps no bytes of a real frame (snap
// length 0) is read. The writer refuses empty frames.
func TestEmptyRecords(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	w, _ := pcapio.NewWriter(&buf, pcapio.WriterOptions{})
	if err := w.WritePacket(gopacket.CaptureInfo{}, nil); err == nil {
		t.Error("empty frame written")
	}
	w.Close()
	hdr := buf.Bytes()[:24]
	rec := func(incl, orig uint32) []byte {
		b := make([]byte, 16)
		binary.LittleEndian.PutUint32(b[8:], incl)
		binary.LittleEndian.PutUint32(b[12:], orig)
		return b
	}
	r, _ := pcapio.NewReader(bytes.NewReader(append(append(bytes.Clone(hdr), rec(0, 60)...), rec(0, 0)...)))
	if d, ci, err := r.Next(); err != nil || len(d) != 0 || ci.Length != 60 {
		t.Fatalf("record 1 (0 of 60 bytes): %d bytes of %d, %v", len(d), ci.Length, err)
	}
	if _, _, err := r.Next(); !errors.Is(err, pcapio.ErrCorrupt) || !strings.Contains(err.Error(), "record 2") || !strings.Contains(err.Error(), "original length 0") {
		t.Fatalf("record 2 (0 of 0 bytes): %v", err)
	}
}

// TestOpenEthernet: a capture of another link type is refused with one
// line naming the file and the link type.
func TestOpenEthernet(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, lt := range []layers.LinkType{layers.LinkTypeEthernet, layers.LinkTypeRaw} {
		var buf bytes.Buffer
		w, _ := pcapio.NewWriter(&buf, pcapio.WriterOptions{LinkType: lt})
		w.WritePacket(gopacket.CaptureInfo{}, make([]byte, 60))
		w.Close()
		path := filepath.Join(dir, lt.String()+".pcap")
		os.WriteFile(path, buf.Bytes(), 0o600)
		r, err := pcapio.OpenEthernet(path)
		if lt == layers.LinkTypeEthernet {
			if err != nil {
				t.Fatal(err)
			}
			r.Close()
			continue
		}
		if !errors.Is(err, pcapio.ErrLinkType) || r != nil {
			t.Fatalf("link type %v: %v", lt, err)
		}
		if want := path + ": unsupported link type Raw (101): only Ethernet captures hold TLP frames"; err.Error() != want {
			t.Errorf("error %q, want %q", err, want)
		}
	}
}

func patch(b []byte, at int, v ...byte) []byte {
	out := append([]byte(nil), b...)
	copy(out[at:], v)
	return out
}

// TestHugeSnaplen: a pcapng interface declaring a 4 GiB snap length must
// not make the reader allocate it (pcapgo sizes its buffer by it).
func TestHugeSnaplen(t *testing.T) {
	// Not parallel: it measures the process's allocations.
	var ng bytes.Buffer
	w, _ := pcapio.NewWriter(&ng, pcapio.WriterOptions{PcapNG: true})
	w.WritePacket(gopacket.CaptureInfo{CaptureLength: 60, Length: 60}, make([]byte, 60))
	w.Close()
	b := ng.Bytes()
	idb := ngBlock(t, b, 1) // Interface Description Block
	b = patch(b, idb+12, 0xff, 0xff, 0xff, 0xff)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r, err := pcapio.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if d, _, err := r.Next(); err != nil || len(d) != 60 {
		t.Fatalf("got %d bytes, %v", len(d), err)
	}
	runtime.ReadMemStats(&after)
	if r.Snaplen() != 0xffffffff {
		t.Errorf("Snaplen %#x, want the declared 0xffffffff", r.Snaplen())
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
		t.Errorf("reading one record allocated %d bytes", n)
	}
}

// ngBlock returns the offset of the first little-endian pcapng block of
// type typ.
func ngBlock(t *testing.T, b []byte, typ uint32) int {
	for off := 0; off+8 <= len(b); {
		if binary.LittleEndian.Uint32(b[off:]) == typ {
			return off
		}
		n := int(binary.LittleEndian.Uint32(b[off+4:]))
		if n < 12 {
			break
		}
		off += n
	}
	t.Fatalf("no block of type %d", typ)
	return 0
}

// TestEveryCut reads every prefix of a capture of two records, plain and
// gzipped: a prefix that ends where the file header or a record ends
// reads as that many records and a clean end; any other fails (io.
// ErrUnexpectedEOF, or at open within the file header). pcapgo took a
// record header followed by nothing as a clean end, so a capture cut
// there read as a shorter one.
func TestEveryCut(t *testing.T) {
	t.Parallel()
	for _, ng := range []bool{false, true} {
		var b bytes.Buffer
		w, _ := pcapio.NewWriter(&b, pcapio.WriterOptions{PcapNG: ng})
		w.Flush()
		ends := []int{b.Len()} // where 0, 1 and 2 records end
		for i := 0; i < 2; i++ {
			w.WritePacket(gopacket.CaptureInfo{CaptureLength: 60, Length: 60}, make([]byte, 60))
			w.Flush()
			ends = append(ends, b.Len())
		}
		w.Close()
		full := b.Bytes()
		for cut := 0; cut <= len(full); cut++ {
			for _, gz := range []bool{false, true} {
				in := full[:cut]
				if gz {
					in = gzipOf(in)
				}
				name := fmt.Sprintf("pcapng %v, gzip %v, %d of %d bytes", ng, gz, cut, len(full))
				whole := slices.Index(ends, cut) // records a clean end holds; -1 none
				r, err := pcapio.NewReader(bytes.NewReader(in))
				if err != nil {
					if whole >= 0 || cut > ends[0] {
						t.Errorf("%s: open: %v", name, err)
					}
					continue
				}
				n := 0
				for {
					if _, _, err = r.Next(); err != nil {
						break
					}
					n++
				}
				switch {
				case whole >= 0 && (err != io.EOF || n != whole):
					t.Errorf("%s: %d records, then %v; want %d and a clean end", name, n, err, whole)
				case whole < 0 && !errors.Is(err, io.ErrUnexpectedEOF):
					t.Errorf("%s: %d records, then %v; want io.ErrUnexpectedEOF", name, n, err)
				}
			}
		}
	}
}

// TestOpenDirectory: a directory is refused by name, not read as an
// empty file.
func TestOpenDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := pcapio.Open(dir)
	if !errors.Is(err, pcapio.ErrNotAFile) || !strings.HasPrefix(err.Error(), dir+": a directory") {
		t.Fatalf("Open(dir): %v", err)
	}
}
