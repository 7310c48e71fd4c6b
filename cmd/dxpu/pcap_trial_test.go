package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestPcapTrialRefusals: findings 11 and 20 of the new user's trial, each
// one line, exit 2, nothing on stdout. An empty --bpf (what
// "$(tcpdump -ddd ...)" gives without tcpdump) was taken silently and the
// default filter ran; --check of a --dir that is not there called it
// stale; a bad --addr asked for a byte count.
func TestPcapTrialRefusals(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "nonexistent")
	// --duration: a regression captures (as root) for a moment, not until killed.
	capture := []string{"pcap", "capture", "--interface", "lo", "--duration", "10ms", "--out", filepath.Join(t.TempDir(), "lo.pcap"), "--bpf"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append(capture[:len(capture):len(capture)], ""),
			`dxpu: capture: --bpf "" is empty (did the command meant to print the program fail?): give a program as ` +
				"'tcpdump -ddd EXPR' prints it, or leave --bpf out (dxpu frames of --udp-port) or use --all"},
		{append(capture[:len(capture):len(capture)], " \n"),
			`dxpu: capture: --bpf "" is empty`},
		{[]string{"pcap", "testdata", "--dir", missing, "--check"},
			"dxpu: testdata: --dir " + missing + ": no such file or directory (--check compares with the corpus there)"},
		{[]string{"pcap", "testdata", "--dir", filepath.Join(repoRoot, "go.mod"), "--check"},
			"dxpu: testdata: --dir " + filepath.Join(repoRoot, "go.mod") + ": not a directory"},
		{[]string{"nettlp", "read", "--addr", "zz"},
			`dxpu: --addr "zz": want a memory address like 0x1000 or 4096 (K, M, G, T suffixes: powers of 1024)`},
		{[]string{"nettlp", "serve", "--addr", "127.0.3.2", "--base", "zz"},
			`dxpu: --base "zz": want a memory address like 0x1000 or 4096`},
	} {
		code, stdout, stderr := runPcap(t.Context(), tc.args...)
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, tc.want) {
			t.Errorf("dxpu %q: exit %d, stdout %q, stderr %q; want 2, nothing, one line starting %q", tc.args, code, stdout, stderr, tc.want)
		}
	}
}

// TestPcapNanosHelp: finding 20. --nanos says each command's own default:
// generate writes microseconds, convert and unseal keep the input's
// resolution (generate and unseal said "for convert, ...").
func TestPcapNanosHelp(t *testing.T) {
	t.Parallel()
	root := newRootCmd(newEnv(strings.NewReader(""), &strings.Builder{}, &strings.Builder{}, nil, noEnv))
	for cmd, want := range map[string]string{
		"generate": "nanosecond timestamps (default: microseconds)",
		"convert":  "nanosecond timestamps; --nanos=false microseconds (default: the input's resolution)",
		"unseal":   "nanosecond timestamps; --nanos=false microseconds (default: the input's resolution)",
	} {
		c, _, err := root.Find([]string{"pcap", cmd})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Flags().Lookup("nanos").Usage; got != want {
			t.Errorf("pcap %s --nanos: %q, want %q", cmd, got, want)
		}
	}
}
