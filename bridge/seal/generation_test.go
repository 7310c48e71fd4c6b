package seal_test

import (
	"errors"
	"testing"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/tlp/encap"
)

// TestUnknownGenerationRecorded: frames under a pair key generation this
// side does not hold (both sides given the same key with different
// generation numbers) are refused as ErrUnknownEpoch and counted apart,
// with the generation they carried, so the owner can say what is wrong;
// an unknown epoch of a generation held is not counted so.
func TestUnknownGenerationRecorded(t *testing.T) {
	t.Parallel()
	host, err := seal.New(seal.Config{PairID: testPair, Role: encap.RoleHost, Mode: seal.ModeGCM}, 0, testKey(0))
	if err != nil {
		t.Fatal(err)
	}
	gpu, err := seal.New(seal.Config{PairID: testPair, Role: encap.RoleGPU, Mode: seal.ModeGCM}, 1, testKey(0))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		f, err := host.SealHandshake(nil, helloFrame(encap.CtlHello), uint64(100+i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := gpu.Open(f); !errors.Is(err, seal.ErrUnknownEpoch) {
			t.Fatalf("HELLO under generation 0 at a generation-1 side: %v, want ErrUnknownEpoch", err)
		}
	}
	if c, s := gpu.Counters(), gpu.State(); c.UnknownGeneration != 3 || c.UnknownEpoch != 3 || c.LastUnknownGeneration != 0 || s.ActiveGeneration != 1 {
		t.Fatalf("unknown generation %d of %d unknown keys, latest generation %d, active %d; want 3 of 3, 0, 1",
			c.UnknownGeneration, c.UnknownEpoch, c.LastUnknownGeneration, s.ActiveGeneration)
	}
	f, err := gpu.SealHandshake(nil, helloFrame(encap.CtlHelloAck), 200)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := host.Open(f); !errors.Is(err, seal.ErrUnknownEpoch) || host.Counters().UnknownGeneration != 1 || host.Counters().LastUnknownGeneration != 1 {
		t.Fatalf("the other way: %v, unknown generation %d, latest %d", err, host.Counters().UnknownGeneration, host.Counters().LastUnknownGeneration)
	}

	// Same generation, an epoch not derived: unknown key, not generation.
	h, g := pair(t, seal.ModeGCM, nil)
	sf, err := h.Seal(nil, plainFrame(encap.MsgTLP, 1, []byte("data")))
	if err != nil {
		t.Fatal(err)
	}
	sf[encap.HeaderLen] += 7 // the epoch byte
	if _, err := g.Open(sf); !errors.Is(err, seal.ErrUnknownEpoch) || g.Counters().UnknownGeneration != 0 {
		t.Fatalf("unknown epoch of generation 1: %v, counted as unknown generation %d", err, g.Counters().UnknownGeneration)
	}
}
