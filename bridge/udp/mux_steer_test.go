package udp

import (
	"testing"

	"golang.org/x/net/bpf"

	"github.com/dxpu/dxpu/tlp/encap"
)

// The steering program, run in x/net/bpf's VM on UDP payloads as the
// kernel runs it: a frame goes to its pair's place; a frame of a pair
// without one, of another version or shorter than the dxpu header goes
// to 0 (the mux's socket). Pair IDs differing only in the byte before
// the ID (the message type) or the top byte of the word are told apart.
func TestSteerProgram(t *testing.T) {
	place := map[uint32]uint32{1: 1, 0xabcdef: 2, 0xffffff: 3}
	vm, err := bpf.NewVM(steerProgram(place))
	if err != nil {
		t.Fatal(err)
	}
	frame := func(v uint8, id uint32, typ byte, n int) []byte {
		f := make([]byte, n)
		if n >= encap.HeaderLen {
			h := encap.Header(f)
			h.SetVersionFlags(v, 0xf)
			h.SetPairID(id)
			f[encap.HeaderPairIDOffset-1] = typ
		}
		return f
	}
	for _, c := range []struct {
		what  string
		frame []byte
		want  int
	}{
		{"pair 1", frame(encap.Version, 1, 0, 64), 1},
		{"pair 0xabcdef, type byte 0xff", frame(encap.Version, 0xabcdef, 0xff, encap.HeaderLen), 2},
		{"pair 0xffffff", frame(encap.Version, 0xffffff, 3, 1500), 3},
		{"pair 2: no place", frame(encap.Version, 2, 0, 64), 0},
		{"pair 0x01000001 cut to 24 bits is 1", frame(encap.Version, 1, 1, 64), 1},
		{"another version", frame(encap.Version+1, 1, 0, 64), 0},
		{"shorter than the header", frame(encap.Version, 1, 0, encap.HeaderLen-1)[:encap.HeaderLen-1], 0},
		{"empty", nil, 0},
	} {
		got, err := vm.Run(c.frame)
		if err != nil || got != c.want {
			t.Errorf("%s: place %d (%v), want %d", c.what, got, err, c.want)
		}
	}
	if n := len(steerProgram(make(map[uint32]uint32, maxSteered))); n > 4096 {
		t.Fatalf("program of no pair: %d instructions", n)
	}
	full := make(map[uint32]uint32, maxSteered)
	for i := range maxSteered {
		full[uint32(i+10)] = uint32(i + 1)
	}
	if p := steerProgram(full); len(p) > 4096 {
		t.Fatalf("program of %d pairs: %d instructions, over classic BPF's 4096", maxSteered, len(p))
	} else if _, err := bpf.Assemble(p); err != nil {
		t.Fatal(err)
	}
}
