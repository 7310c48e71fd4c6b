package seal_test

import (
	"bytes"
	"testing"

	"github.com/dxpu/dxpu/bridge/seal"
)

// FuzzParseKeyLogLine: a key log line from anywhere never panics the
// reader, and a line it accepts writes back as a line that reads the same.
func FuzzParseKeyLogLine(f *testing.F) {
	f.Add("DXPU_HANDSHAKE_SECRET pair=1 gen=3 role=host mode=gcm secret=" + string(bytes.Repeat([]byte("ab"), 32)))
	f.Add("DXPU_SESSION_SECRET pair=7 gen=1 role=gpu mode=gmac host_nonce=0011223344556677 gpu_nonce=8899aabbccddeeff secret=" + string(bytes.Repeat([]byte("0f"), 32)))
	f.Add("DXPU_SESSION_SECRET pair=")
	f.Add("")
	f.Fuzz(func(t *testing.T, line string) {
		s, err := seal.ParseKeyLogLine(line)
		if err != nil {
			return
		}
		again := string(bytes.TrimSuffix(s.AppendLine(nil), []byte("\n")))
		s2, err := seal.ParseKeyLogLine(again)
		if err != nil {
			t.Fatalf("%q parsed, but its rewrite %q does not: %v", line, again, err)
		}
		if string(s2.AppendLine(nil)) != again+"\n" {
			t.Fatalf("%q -> %q -> %q", line, again, s2.AppendLine(nil))
		}
		_, _ = seal.ReadKeyLog(bytes.NewReader([]byte(line + "\n" + line)))
	})
}

// FuzzUnseal: `dxpu pcap unseal` on hostile frames never panics, never
// changes its input and opens nothing without a logged secret.
func FuzzUnseal(f *testing.F) {
	for _, g := range genuine() {
		f.Add(g)
	}
	f.Add([]byte{})
	u := seal.NewUnsealer(nil)
	f.Fuzz(func(t *testing.T, frame []byte) {
		in := append([]byte(nil), frame...)
		if _, _, err := u.Unseal(nil, in); err == nil {
			t.Fatalf("opened %x with no secret", frame)
		}
		if !bytes.Equal(in, frame) {
			t.Fatal("Unseal changed its input")
		}
	})
}
