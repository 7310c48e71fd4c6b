package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runPcap runs one dxpu command line over ctx and returns its exit
// status, stdout and stderr.
func runPcap(ctx context.Context, args ...string) (int, string, string) {
	var out, errb strings.Builder
	code := run(ctx, newEnv(strings.NewReader(""), &out, &errb, args, noEnv))
	return code, out.String(), errb.String()
}

// usageLine fails unless a command exited 2 with nothing on stdout and
// exactly want, one line, on stderr.
func usageLine(t *testing.T, args []string, code int, stdout, stderr, want string) {
	t.Helper()
	if code != 2 || stdout != "" || stderr != want+"\n" {
		t.Errorf("dxpu %q: exit %d, stdout %q, stderr %q; want 2, nothing, %q", args, code, stdout, stderr, want)
	}
}

// TestPcapOperands: a pcap command missing its operands names itself and
// its usage in one line, exit 2 (through the shared argument-count check,
// nameArgCountErrors); cobra's "requires at least 1 arg(s), only received
// 0" named neither.
func TestPcapOperands(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"pcap", "info"}, []string{"dxpu: pcap info: ", "dxpu pcap info FILE..."}},
		{[]string{"pcap", "info", "--json"}, []string{"dxpu: pcap info: ", "dxpu pcap info FILE..."}},
		{[]string{"pcap", "unseal"}, []string{"dxpu: pcap unseal: ", "dxpu pcap unseal --key-log FILE IN OUT"}},
		{[]string{"pcap", "unseal", "--key-log", "k", "in.pcap"}, []string{"dxpu: pcap unseal: ", "dxpu pcap unseal --key-log FILE IN OUT"}},
	} {
		code, stdout, stderr := runPcap(t.Context(), tc.args...)
		ok := code == 2 && stdout == "" && strings.Count(stderr, "\n") == 1 && strings.HasPrefix(stderr, tc.want[0])
		for _, w := range tc.want[1:] {
			ok = ok && strings.Contains(stderr, w)
		}
		if !ok {
			t.Errorf("dxpu %q: exit %d, stdout %q, stderr %q; want 2, nothing, one line with %q", tc.args, code, stdout, stderr, tc.want)
		}
	}
}

// TestPcapOutDash: convert, generate and capture refuse --out "-" in one
// line, as unseal refuses OUT "-": no pcap command writes a capture to
// standard output, and each wrote a file named "-".
func TestPcapOutDash(t *testing.T) {
	in, err := filepath.Abs(filepath.Join(repoRoot, "testdata", "pcap", "mix.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir()) // where a "-" the bug writes lands
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"pcap", "convert", "--in", in, "--out", "-", "--to", "dxpu-udp"},
			`dxpu: convert: --out "-": want a file: pcap commands write captures to files, not standard output`},
		{[]string{"pcap", "generate", "--out", "-", "--count", "2"},
			`dxpu: generate: --out "-": want a file: pcap commands write captures to files, not standard output`},
		{[]string{"pcap", "capture", "--interface", "lo", "--out", "-", "--count", "1", "--duration", "100ms"},
			`dxpu: capture: --out "-": want a file: pcap commands write captures to files, not standard output`},
	} {
		code, stdout, stderr := runPcap(t.Context(), tc.args...)
		usageLine(t, tc.args, code, stdout, stderr, tc.want)
		if _, err := os.Stat("-"); err == nil {
			t.Errorf("dxpu %q wrote a file named \"-\"", tc.args)
			_ = os.Remove("-")
		}
	}
}

// TestPcapOutIsIn: convert and unseal refuse an output that is one of
// their inputs, in one line, and leave it whole. `pcap convert --in
// mix.pcap --out mix.pcap` once truncated mix.pcap and failed reading it.
func TestPcapOutIsIn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "mix.pcap")
	mix, err := os.ReadFile(filepath.Join(repoRoot, "testdata", "pcap", "mix.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(dir, "keys.log")
	// The key log 0600, as the bridges write it and unseal wants it.
	for p, b := range map[string][]byte{in: mix, keys: []byte("# none\n")} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"pcap", "convert", "--in", in, "--out", in, "--to", "dxpu-udp"},
			"dxpu: convert: --out " + in + " is the same file as --in " + in + ": write the output elsewhere"},
		{[]string{"pcap", "unseal", "--key-log", keys, in, in},
			"dxpu: unseal: OUT " + in + " is the same file as IN " + in + ": write the output elsewhere"},
		{[]string{"pcap", "unseal", "--key-log", keys, in, keys},
			"dxpu: unseal: OUT " + keys + " is the same file as --key-log " + keys + ": write the output elsewhere"},
	} {
		code, stdout, stderr := runPcap(t.Context(), tc.args...)
		usageLine(t, tc.args, code, stdout, stderr, tc.want)
		if b, _ := os.ReadFile(in); !bytes.Equal(b, mix) {
			t.Fatalf("dxpu %q: mix.pcap is now %d bytes, was %d", tc.args, len(b), len(mix))
		}
		if b, _ := os.ReadFile(keys); string(b) != "# none\n" {
			t.Fatalf("dxpu %q: the key log is now %d bytes", tc.args, len(b))
		}
	}
}

// TestPcapFailedConvertKeepsOut: a convert that fails half way (its input
// ends inside a record) exits 2 with the one read error and leaves --out
// as it was, with no temporary file beside it.
func TestPcapFailedConvertKeepsOut(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mix, err := os.ReadFile(filepath.Join(repoRoot, "testdata", "pcap", "mix.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	in, out := filepath.Join(dir, "cut.pcap"), filepath.Join(dir, "out.pcap")
	if err := os.WriteFile(in, mix[:len(mix)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, mix, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"pcap", "convert", "--in", in, "--out", out, "--to", "nettlp"}
	code, stdout, stderr := runPcap(t.Context(), args...)
	if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "unexpected EOF") {
		t.Errorf("dxpu %q: exit %d, stdout %q, stderr %q; want 2 and the read error", args, code, stdout, stderr)
	}
	if b, _ := os.ReadFile(out); !bytes.Equal(b, mix) {
		t.Errorf("out.pcap is now %d bytes, was %d", len(b), len(mix))
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("%d files in the directory, want cut.pcap and out.pcap", len(ents))
	}
}

// TestPcapGenerateBounded: a --count that would fill the disk is refused
// in one line naming the flag, its value and the limit, and nothing is
// written. --count 99999999999 once wrote 5.3 GB until killed.
func TestPcapGenerateBounded(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "x.pcap")
	// Cancelled from the start: were the limit gone, the generator would
	// stop at once (exit 130) instead of filling the disk.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--count", "99999999999"}, "dxpu: generate: --count 99999999999: want at most 10000000 frames"},
		{[]string{"--count", "2000000", "--ether-mtu", "9000"},
			"dxpu: generate: --count 2000000: frames of up to 9018 bytes (--ether-mtu 9000) could make 16.9 GiB: want at most 16 GiB (lower --count, or cut frames with --snaplen)"},
		{[]string{"--snaplen", "4294967297"}, "dxpu: generate: --snaplen 4294967297: want at most 262144 (0: whole frames)"},
		// Its own words for --vlan and --snaplen (new-user trial: -2 and 0
		// were taken, and --snaplen 5 wrote frames nothing could read).
		{[]string{"--vlan", "-2"}, "dxpu: generate: --vlan -2: want 1..4094 (or -1 for none)"},
		{[]string{"--vlan", "0", "--encap", "dxpu-eth"}, "dxpu: generate: --vlan 0: want 1..4094 (or -1 for none)"},
		{[]string{"--snaplen", "5"}, "dxpu: generate: --snaplen 5: want 0 (whole frames) or at least 86 (the headers of a tagged dxpu-udp frame)"},
	} {
		args := append([]string{"pcap", "generate", "--out", out}, tc.args...)
		code, stdout, stderr := runPcap(ctx, args...)
		usageLine(t, args, code, stdout, stderr, tc.want)
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("dxpu %q wrote %s (%v)", args, out, err)
		}
	}
	// An interrupted generate exits 130 and writes nothing.
	args := []string{"pcap", "generate", "--out", out}
	if code, stdout, stderr := runPcap(ctx, args...); code != 130 || stdout != "" || !strings.Contains(stderr, "interrupted") {
		t.Errorf("dxpu %q, interrupted: exit %d, stdout %q, stderr %q; want 130", args, code, stdout, stderr)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an interrupted generate wrote %s (%v)", out, err)
	}
}

// TestPcapCaptureFlags: capture's --snaplen counts bytes as every byte
// flag does (64K), and a bad value is one line naming that flag alone
// (it took a bare integer, and named all three flags for one bad count).
func TestPcapCaptureFlags(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "c.pcap")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--snaplen", "64K", "--count", "-1"}, "dxpu: capture: --count -1: want 0 (no limit) or more"},
		{[]string{"--snaplen", "512K"}, "dxpu: capture: --snaplen 524288: want 0 (65535) up to 262144"},
		{[]string{"--duration", "-1s"}, "dxpu: capture: --duration -1s: want 0 (until Ctrl-C) or more"},
	} {
		args := append([]string{"pcap", "capture", "--interface", "lo", "--out", out}, tc.args...)
		code, stdout, stderr := runPcap(t.Context(), args...)
		usageLine(t, args, code, stdout, stderr, tc.want)
	}
}
