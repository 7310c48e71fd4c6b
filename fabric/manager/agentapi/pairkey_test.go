package agentapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/fabric/manager"
)

// TestPairKeyOnTheWire: programming carries the pair's key and generation
// in the body; the agent decodes them back; malformed keys are refused.
func TestPairKeyOnTheWire(t *testing.T) {
	t.Parallel()
	p := manager.Pair{ID: 7, Key: manager.PairKey{Generation: 9}}
	for i := range p.Key.Key {
		p.Key.Key[i] = byte(i)
	}
	b, err := json.Marshal(wirePair{Pair: p, Key: "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", KeyGeneration: 9})
	if err != nil {
		t.Fatal(err)
	}
	var wp wirePair
	if err := json.Unmarshal(b, &wp); err != nil {
		t.Fatal(err)
	}
	got, err := wp.pair()
	if err != nil || got.Key != p.Key {
		t.Fatalf("decoded %v %v, want %v", got.Key, err, p.Key)
	}
	// The pair's own JSON never holds the key.
	if pj, _ := json.Marshal(p); strings.Contains(string(pj), "0001020304") || strings.Contains(string(pj), "key") {
		t.Fatalf("pair JSON %s", pj)
	}
	for _, bad := range []wirePair{
		{Key: "00"}, {Key: strings.Repeat("zz", 32), KeyGeneration: 1},
		{Key: strings.Repeat("00", 32)}, {KeyGeneration: 4},
	} {
		if _, err := bad.pair(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
