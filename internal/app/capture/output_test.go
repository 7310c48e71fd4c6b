package capture

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/internal/app/apperr"
)

// mixPcap is the corpus capture the tests below rewrite.
var mixPcap = filepath.Join("..", "..", "..", "testdata", "pcap", "mix.pcap")

// copyFile copies src to a new file dst and returns its bytes.
func copyFile(t *testing.T, src, dst string) []byte {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

// unchanged fails unless path still holds want and its directory holds
// only the files named (no temporary file left behind).
func unchanged(t *testing.T, path string, want []byte, files ...string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s changed: %d bytes, was %d", filepath.Base(path), len(got), len(want))
	}
	ents, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != strings.Join(files, " ") {
		t.Errorf("directory holds %v, want %v", names, files)
	}
}

// TestConvertRefusesItsInput: an --out that is --in (by any name) is a
// usage error, and the input is left whole. It once truncated mix.pcap
// from 15322 to 4644 bytes and then failed reading it.
func TestConvertRefusesItsInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "mix.pcap")
	want := copyFile(t, mixPcap, in)
	if err := os.Symlink("mix.pcap", filepath.Join(dir, "link.pcap")); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{in, filepath.Join(dir, ".", "mix.pcap"), filepath.Join(dir, "link.pcap")} {
		err := convert(t, convertTo(in, out, "dxpu-udp"))
		if !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), "is the same file as --in") {
			t.Errorf("--out %s: %v, want a usage error naming --in", out, err)
		}
		unchanged(t, in, want, "link.pcap", "mix.pcap")
	}
}

// TestConvertFailureKeepsOut: a conversion that fails half way (the input
// ends inside a record) leaves an existing --out as it was, and no
// temporary file.
func TestConvertFailureKeepsOut(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mix, err := os.ReadFile(mixPcap)
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "cut.pcap")
	if err := os.WriteFile(in, mix[:len(mix)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.pcap")
	old := []byte("an earlier capture")
	if err := os.WriteFile(out, old, 0o600); err != nil {
		t.Fatal(err)
	}
	err = convert(t, convertTo(in, out, "nettlp"))
	if err == nil || !strings.Contains(err.Error(), "unexpected EOF") {
		t.Fatalf("converting a cut capture: %v, want its read error", err)
	}
	unchanged(t, out, old, "cut.pcap", "out.pcap")

	// Success replaces the file and keeps its mode.
	if err := convert(t, convertTo(mixPcap, out, "nettlp")); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm() != 0o600 || st.Size() < 1000 {
		t.Errorf("after a conversion: %v, %v; want a new capture of mode 0600", st, err)
	}
}

// TestInterruptedKeepsOut: a command whose context ends (Ctrl-C) leaves
// --out as it was and no temporary file.
func TestInterruptedKeepsOut(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "out.pcap")
	old := []byte("an earlier capture")
	if err := os.WriteFile(out, old, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := Generate(ctx, GenerateOptions{Out: out, Kind: "mix", Encap: "mix", VLAN: -1, Count: 100, Seed: 1,
		Pairs: 4, MaxTLPs: 8, MaxDW: 32, MTU: 1500, Control: 10}, io.Discard)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("generate: %v, want interrupted", err)
	}
	unchanged(t, out, old, "out.pcap")
	err = Convert(ctx, convertTo(mixPcap, out, "dxpu-eth"), io.Discard, io.Discard)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("convert: %v, want interrupted", err)
	}
	unchanged(t, out, old, "out.pcap")
}

// TestGenerateBounded: counts and sizes that would fill a disk are usage
// errors naming the flag, before anything is written. --count 99999999999
// once wrote 5.3 GB until killed.
func TestGenerateBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "g.pcap")
	for _, tc := range []struct {
		change func(*GenerateOptions)
		want   string
	}{
		{func(o *GenerateOptions) { o.Count = 99999999999 }, "--count 99999999999: want at most 10000000 frames"},
		{func(o *GenerateOptions) { o.Count = MaxFrames + 1 }, "--count 10000001: want at most 10000000 frames"},
		{func(o *GenerateOptions) { o.Count, o.MTU, o.MaxDW = 1_000_000, 65535, 1024 },
			"--count 1000000: frames of up to 65553 bytes (--ether-mtu 65535) could make 61.1 GiB: want at most 16 GiB"},
		{func(o *GenerateOptions) { o.Count, o.MTU, o.Snaplen = MaxFrames, 9000, 2000 },
			"--count 10000000: frames of up to 2000 bytes (--snaplen 2000) could make 19.0 GiB: want at most 16 GiB (lower --count or --snaplen)"},
		{func(o *GenerateOptions) { o.MTU = 70000 }, "--ether-mtu 70000: want at most 65535"},
		{func(o *GenerateOptions) { o.Snaplen = 1<<32 + 1 }, "--snaplen 4294967297: want at most 262144"},
	} {
		o := GenerateOptions{Out: out, Kind: "mix", Encap: "mix", VLAN: -1, Count: 100, Seed: 1,
			Pairs: 4, MaxTLPs: 8, MaxDW: 32, MTU: 1500, Control: 10}
		tc.change(&o)
		// Should the check regress, the cancelled context stops the
		// generator at once instead of filling the disk.
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		err := Generate(ctx, o, io.Discard)
		if !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want a usage error with %q", o, err, tc.want)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%+v wrote %s (%v)", o, out, err)
		}
	}
	// The defaults fit at the most frames.
	o := Traffic{Count: MaxFrames, Pairs: 4, MaxTLPs: 8, MaxDW: 32, MTU: 1500}
	if err := o.Check(); err != nil {
		t.Errorf("--count %d with the defaults: %v", MaxFrames, err)
	}
}

// TestOutputToDevice: an --out that is not a regular file (/dev/null) is
// written as it is, not replaced by a rename.
func TestOutputToDevice(t *testing.T) {
	t.Parallel()
	st, err := os.Stat(os.DevNull)
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		t.Skipf("no character device %s (%v)", os.DevNull, err)
	}
	if err := convert(t, convertTo(mixPcap, os.DevNull, "dxpu-eth")); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(os.DevNull); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("%s is now %v (%v)", os.DevNull, st.Mode(), err)
	}
}

// TestUnsealRefusesItsInputs: OUT naming IN or the key log is a usage
// error, and neither is touched.
func TestUnsealRefusesItsInputs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "in.pcap")
	keys := filepath.Join(dir, "keys.log")
	want := copyFile(t, mixPcap, in)
	if err := os.WriteFile(keys, []byte("# no secrets\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for out, name := range map[string]string{in: "IN", keys: "--key-log"} {
		err := Unseal(UnsealOptions{In: in, Out: out, KeyLog: keys, UDPPort: 7001}, io.Discard, io.Discard)
		if !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), "is the same file as "+name) {
			t.Errorf("OUT %s: %v, want a usage error naming %s", out, err, name)
		}
	}
	unchanged(t, in, want, "in.pcap", "keys.log")
	if b, _ := os.ReadFile(keys); string(b) != "# no secrets\n" {
		t.Errorf("the key log changed: now %d bytes", len(b))
	}
}
