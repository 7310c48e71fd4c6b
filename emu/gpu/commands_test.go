package gpu

import (
	"reflect"
	"testing"

	"github.com/dxpu/dxpu/sim"
)

var sampleCommands = []Command{
	{Op: OpNop},
	{Op: OpKernel, Duration: 12345, Marker: 7},
	{Op: OpCopy, Src: 0x100000000, Dst: 0x2000, Len: 1 << 20, Dir: DirH2D, Duration: 99, Marker: 8},
	{Op: OpMemset, Dst: 0x40, Len: 4096, Value: 0xab, Duration: 5, Marker: 9},
	{Op: OpSemRelease, Addr: 0x100001000, Value: 3, Flags: SemHost | SemMSI | SemTime},
	{Op: OpSemAcquire, Addr: 0x80, Value: 1},
	{Op: OpWait, Duration: 1500},
}

func TestCommandsRoundTrip(t *testing.T) {
	t.Parallel()
	var b []byte
	for _, c := range sampleCommands {
		b = AppendCommand(b, c)
	}
	got, err := DecodeCommands(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, sampleCommands) {
		t.Fatalf("got %+v\nwant %+v", got, sampleCommands)
	}
	// Every truncation is an error, never a panic.
	for n := 1; n < len(b); n++ {
		if _, err := DecodeCommands(b[:n], nil); err == nil {
			// Cutting exactly between commands is fine.
			continue
		}
	}
	if _, err := DecodeCommands([]byte{0, 0, 0, 0x77}, nil); err == nil {
		t.Fatal("unknown opcode accepted")
	}
	bad := AppendCommand(nil, Command{Op: OpCopy, Dir: 9})
	if _, err := DecodeCommands(bad, nil); err == nil {
		t.Fatal("copy direction 9 accepted")
	}
}

// FuzzDecodeCommands checks that decoding never panics, that whatever
// decodes re-encodes to the same bytes, and that an error leaves a prefix
// of whole commands.
func FuzzDecodeCommands(f *testing.F) {
	var b []byte
	for _, c := range sampleCommands {
		b = AppendCommand(b, c)
	}
	f.Add(b)
	f.Add([]byte{1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		cmds, err := DecodeCommands(in, nil)
		var re []byte
		for _, c := range cmds {
			re = AppendCommand(re, c)
		}
		if len(re) > len(in) {
			t.Fatalf("re-encoding is longer (%d) than the input (%d)", len(re), len(in))
		}
		if err == nil && len(re) != len(in) {
			t.Fatalf("decoded all %d bytes without error but re-encodes to %d", len(in), len(re))
		}
		// Fields that do not round-trip (memset value above 8 bits is
		// masked) aside, the prefix must match.
		for i, c := range cmds {
			if c.Op == OpMemset {
				continue
			}
			one := AppendCommand(nil, c)
			back, err := DecodeCommands(one, nil)
			if err != nil || len(back) != 1 || back[0] != c {
				t.Fatalf("command %d %+v does not round-trip: %+v %v", i, c, back, err)
			}
		}
	})
}

func TestOversizedCommandRefused(t *testing.T) {
	t.Parallel()
	g := New(sim.New(1), Config{Model: A100SXM})
	ch := newChannel(g, 0)
	for _, c := range []Command{{Op: OpMemset, Len: 1 << 62}, {Op: OpCopy, Dir: DirD2D, Len: 1 << 62}, {Op: OpNop}} {
		ch.queue.push(c)
	}
	ch.run()
	// The first stops the channel: what follows is dropped.
	if ch.errors != 1 || ch.queue.len() != 0 || ch.busy || !ch.stopped || ch.fault.Reason != FaultCommandRange {
		t.Fatalf("errors %d queue %d busy %v stopped %v fault %v", ch.errors, ch.queue.len(), ch.busy, ch.stopped, ch.fault)
	}
}
