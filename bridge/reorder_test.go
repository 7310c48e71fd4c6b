package bridge

import (
	"testing"
	"time"

	"github.com/dxpu/dxpu/tlp/encap"
)

// TestReorderWindowClassify: where a sequence number falls, relative to
// next = 0xfffffffe (so the window wraps) with TLP next+2 held.
func TestReorderWindowClassify(t *testing.T) {
	var next uint32 = 0xfffffffe
	tests := []struct {
		name string
		seq  uint32
		want arrival
	}{
		{"next", next, arrivalNew},
		{"just before next", next - 1, arrivalOld},
		{"far before next", next - 1000, arrivalOld},
		{"held (across the wrap)", next + 2, arrivalHeld},
		{"free slot after the held one", next + 3, arrivalNew},
		{"last in the window", next + 7, arrivalNew},
		{"first past the window", next + 8, arrivalBeyond},
		{"far past the window", next + 1<<20, arrivalBeyond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newReorderWindow(8)
			w.next = next
			w.store(next+2, 5, 64)
			if got := w.classify(tc.seq); got != tc.want {
				t.Errorf("classify(%#x) with next %#x = %d, want %d", tc.seq, next, got, tc.want)
			}
		})
	}
}

// TestReorderWindowDeliversInOrderOnce stores arrivals in the given order
// (a repeated number is a duplicate of one held or delivered) and drains
// after each: every TLP comes out once, in sequence order.
func TestReorderWindowDeliversInOrderOnce(t *testing.T) {
	tests := []struct {
		name     string
		arrivals []uint32 // offsets from the first sequence number
		dups     int
	}{
		{"in order", []uint32{0, 1, 2, 3}, 0},
		{"reversed", []uint32{3, 2, 1, 0}, 0},
		{"hole filled last", []uint32{1, 2, 3, 0}, 0},
		{"held duplicate", []uint32{2, 2, 1, 0, 3}, 1},
		{"held duplicate after the hole closed", []uint32{1, 3, 0, 3, 2}, 1},
		{"delivered duplicate", []uint32{0, 0, 1, 2, 3}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var first uint32 = 0xfffffffe
			w := newReorderWindow(8)
			w.next = first
			var got []int32
			dups := 0
			for _, off := range tc.arrivals {
				seq := first + off
				switch w.classify(seq) {
				case arrivalNew:
					w.store(seq, int32(off), 16+int(off))
				case arrivalHeld, arrivalOld:
					dups++
				default:
					t.Fatalf("seq %#x: beyond the window", seq)
				}
				for {
					slot, n, ok := w.head()
					if !ok {
						break
					}
					if n != 16+int(slot) {
						t.Fatalf("slot %d came out with length %d, stored %d", slot, n, 16+slot)
					}
					got = append(got, slot)
					w.advance()
				}
			}
			if len(got) != 4 || got[0] != 0 || got[1] != 1 || got[2] != 2 || got[3] != 3 {
				t.Errorf("delivered %v, want [0 1 2 3]", got)
			}
			if dups != tc.dups {
				t.Errorf("%d duplicates rejected, want %d", dups, tc.dups)
			}
			if w.held != 0 || w.count() != 0 || w.next != first+4 {
				t.Errorf("after draining: held %d (counted %d), next %#x", w.held, w.count(), w.next)
			}
		})
	}
}

// TestReorderWindowSackAndHole: the SACK bitmap names the held TLPs after
// next, and hole says whether they wait behind a missing one.
func TestReorderWindowSackAndHole(t *testing.T) {
	tests := []struct {
		name   string
		window int
		held   []uint32 // offsets from next
		sack   uint32
		hole   bool
	}{
		{"nothing held", 64, nil, 0, false},
		{"next itself held", 64, []uint32{0}, 0, false},
		{"one behind a hole", 64, []uint32{1}, 1, true},
		{"several", 64, []uint32{1, 3, 32}, 1<<0 | 1<<2 | 1<<31, true},
		{"beyond 32 bits not reported", 64, []uint32{33}, 0, true},
		{"small window", 4, []uint32{1, 3}, 1<<0 | 1<<2, true},
		// Bit 3 would be next+4, whose slot is next's (ACK-4).
		{"small window, next held", 4, []uint32{0, 2}, 1 << 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newReorderWindow(tc.window)
			w.next = 100
			for i, off := range tc.held {
				w.store(100+off, int32(i), 16)
			}
			if got := w.sack(); got != tc.sack {
				t.Errorf("sack %#x, want %#x", got, tc.sack)
			}
			if got := w.hole(); got != tc.hole {
				t.Errorf("hole %v, want %v", got, tc.hole)
			}
		})
	}
}

// TestReorderWindowRestart hands every held slot back and starts at the
// new sequence number.
func TestReorderWindowRestart(t *testing.T) {
	p := newPool(4, 16)
	w := newReorderWindow(8)
	for _, seq := range []uint32{1, 2, 5} {
		w.store(seq, p.get(), 16)
	}
	w.restart(0x1234, &p)
	if len(p.free) != 4 || w.held != 0 || w.count() != 0 || w.next != 0x1234 {
		t.Fatalf("after restart: %d of 4 slots free, held %d, next %#x", len(p.free), w.held, w.next)
	}
	if w.classify(0x1234+2) != arrivalNew {
		t.Fatalf("a slot held before the restart still counts as held")
	}
}

// TestHeldDuplicateRejected: the GPU side holds a TLP behind a hole and
// receives its frame again; the copy is rejected (counted as a duplicate,
// its buffer not taken), and once the hole is filled every TLP is
// delivered exactly once, in order.
func TestHeldDuplicateRejected(t *testing.T) {
	p := newTestPair(t, Config{}, Config{})
	p.up()
	var frames [][]byte
	p.drop = func(from *Bridge, f []byte) bool {
		if from == p.h && encap.Header(f).Type() == encap.MsgTLP {
			frames = append(frames, append([]byte(nil), f...))
			return true // held back; delivered by hand below
		}
		return false
	}
	for i := 0; i < 3; i++ {
		p.send(p.h, mwr(0x1000*uint64(i+1), 64))
		p.run()
	}
	if len(frames) != 3 {
		t.Fatalf("%d TLP frames, want one per write", len(frames))
	}
	p.drop = nil
	for _, f := range [][]byte{frames[1], frames[2], frames[2], frames[1]} {
		if err := p.g.HandleFrame(p.now, f); err != nil {
			t.Fatal(err)
		}
		if err := p.g.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
	if got := p.g.Counters().Duplicates; got != 2 {
		t.Fatalf("%d duplicates counted, want 2", got)
	}
	if got := p.g.reorder.held; got != 2 {
		t.Fatalf("%d TLPs held behind the hole, want 2", got)
	}
	if err := p.g.HandleFrame(p.now, frames[0]); err != nil {
		t.Fatal(err)
	}
	p.run()
	p.advance(2*time.Millisecond, 50*time.Microsecond)
	if len(p.gq) != 3 {
		t.Fatalf("delivered %d TLPs, want 3", len(p.gq))
	}
	for i, d := range p.gq {
		if got, want := d.v().Address(), 0x1000*uint64(i+1); got != want {
			t.Fatalf("TLP %d: address %#x, want %#x", i, got, want)
		}
	}
	if err := p.g.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
