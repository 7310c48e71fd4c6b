package vm

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseGPU(t *testing.T) {
	t.Parallel()
	g, err := ParseGPU("pair=7,listen=127.0.0.1:0,peer=127.0.0.1:9", true)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Transport.Close()
	if g.Bridge.PairID != 7 || g.Bridge.RequireKeys {
		t.Fatalf("pair %d, keys required %v", g.Bridge.PairID, g.Bridge.RequireKeys)
	}
	for spec, want := range map[string]string{
		"pair=1,listen=127.0.0.1:1":                                   "all needed",
		"pair=0,listen=127.0.0.1:1,peer=127.0.0.1:2":                  "16777215",
		"pair=1,listen=127.0.0.1:1,peer=127.0.0.1:2,colour=red":       "unknown key",
		"pair=1,listen=here,peer=127.0.0.1:2":                         "listen",
		"pair=1,listen=127.0.0.1:1,peer=127.0.0.1:2":                  "key=FILE is needed",
		"pair=1,listen=127.0.0.1:1,peer=127.0.0.1:2,key=/nonexistent": "pair key file",
		"pair=1,listen=127.0.0.1:1,peer=127.0.0.1:2,gen=0,key=k":      `gen="0": want 1..`,
		"pair=1,listen=127.0.0.1:1,peer=127.0.0.1:2,gen=-1,key=k":     `gen="-1"`,
		"pair=1,listen=127.0.0.1:1,peer=127.0.0.1:2,pair=2":           "pair= given twice",
	} {
		if _, err := ParseGPU(spec, false); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--gpu") {
			t.Errorf("%s: %v, want an error naming --gpu and %q", spec, err, want)
		}
	}
	if _, err := ParseGPUSpec("pair=1,listen=127.0.0.1:1,peer=127.0.0.1:2,gen=3", true); err == nil || !strings.Contains(err.Error(), "numbers the key") {
		t.Errorf("gen= without a key: %v", err)
	}
}

// TestGPUSpecKeyGeneration: a key file's generation is 1 unless gen= says
// otherwise, as `dxpu bridge --key-generation` defaults (vm run once
// sealed with 0, and no pair came up).
func TestGPUSpecKeyGeneration(t *testing.T) {
	t.Parallel()
	key := filepath.Join(t.TempDir(), "pair.key")
	if err := os.WriteFile(key, bytes.Repeat([]byte{7}, 32), 0o600); err != nil {
		t.Fatal(err)
	}
	for spec, want := range map[string]uint32{
		"pair=1,listen=127.0.0.1:1,peer=127.0.0.1:2,key=" + key:                1,
		"pair=1,listen=127.0.0.1:1,peer=127.0.0.1:2,key=" + key + ",gen=7":     7,
		"pair=1,listen=127.0.0.1:1,peer=127.0.0.1:2,gen=1700000000,key=" + key: 1700000000,
	} {
		sp, err := ParseGPUSpec(spec, false)
		if err != nil || sp.KeyGeneration != want || sp.Bridge().KeyGeneration != want || !sp.Bridge().RequireKeys {
			t.Errorf("%s: generation %d (bridge %d), %v; want %d", spec, sp.KeyGeneration, sp.Bridge().KeyGeneration, err, want)
		}
	}
}
