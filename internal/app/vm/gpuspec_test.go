package vm

import (
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
	} {
		if _, err := ParseGPU(spec, false); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--gpu") {
			t.Errorf("%s: %v, want an error naming --gpu and %q", spec, err, want)
		}
	}
}
