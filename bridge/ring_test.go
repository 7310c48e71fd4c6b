package bridge

import "testing"

// TestFifo: push, grow (filled in place), pop, at and removeAt keep order
// across the wrap and refuse to overfill.
func TestFifo(t *testing.T) {
	tests := []struct {
		name   string
		pre    int // pushed and popped first, to move the head
		push   []int
		remove int // index to removeAt; -1 none
		want   []int
	}{
		{"plain", 0, []int{1, 2, 3}, -1, []int{1, 2, 3}},
		{"wrapped", 3, []int{1, 2, 3, 4}, -1, []int{1, 2, 3, 4}},
		{"remove middle wrapped", 3, []int{1, 2, 3, 4}, 2, []int{1, 2, 4}},
		{"remove head", 1, []int{1, 2, 3}, 0, []int{2, 3}},
		{"remove last", 2, []int{1, 2, 3, 4}, 3, []int{1, 2, 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFifo[int](4)
			for i := 0; i < tc.pre; i++ {
				f.push(-1)
				f.pop()
			}
			for i, v := range tc.push {
				if i%2 == 1 {
					p := f.grow()
					if p == nil {
						t.Fatalf("grow for %d refused at %d of 4", v, f.len())
					}
					*p = v
				} else if !f.push(v) {
					t.Fatalf("push %d refused at %d of 4", v, f.len())
				}
			}
			if f.full() != (len(tc.push) == 4) || (f.full() && (f.push(9) || f.grow() != nil)) {
				t.Fatalf("full %v with %d of 4", f.full(), f.len())
			}
			if tc.remove >= 0 {
				if got := f.removeAt(tc.remove); got != tc.push[tc.remove] {
					t.Fatalf("removeAt(%d) = %d", tc.remove, got)
				}
			}
			if *f.peek() != tc.want[0] {
				t.Fatalf("peek %d, want %d", *f.peek(), tc.want[0])
			}
			var got []int
			for f.len() > 0 {
				got = append(got, f.pop())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// TestPool hands out every slot once, separate bytes each, and takes them
// back.
func TestPool(t *testing.T) {
	p := newPool(3, 8)
	seen := map[int32]bool{}
	for i := 0; i < 3; i++ {
		s := p.get()
		if s < 0 || seen[s] {
			t.Fatalf("get %d: slot %d (seen %v)", i, s, seen)
		}
		seen[s] = true
		b := p.bytes(s, 8)
		for j := range b {
			b[j] = byte(s)
		}
	}
	if s := p.get(); s != -1 {
		t.Fatalf("empty pool gave slot %d", s)
	}
	for s := range seen {
		for _, v := range p.bytes(s, 8) {
			if v != byte(s) {
				t.Fatalf("slot %d overwritten by another", s)
			}
		}
		if cap(p.bytes(s, 2)) != 8 {
			t.Fatalf("slot %d: capacity reaches past the slot", s)
		}
		p.put(s)
	}
	if len(p.free) != p.capacity() {
		t.Fatalf("%d of %d free after returning all", len(p.free), p.capacity())
	}
}

// TestSeqCompare: sequence numbers compare modulo 2^32.
func TestSeqCompare(t *testing.T) {
	tests := []struct {
		a, b    uint32
		lt, leq bool
	}{
		{1, 2, true, true},
		{2, 2, false, true},
		{3, 2, false, false},
		{0xffffffff, 0, true, true},
		{0, 0xffffffff, false, false},
		{0, 0x7fffffff, true, true},
	}
	for _, tc := range tests {
		if seqLT(tc.a, tc.b) != tc.lt || seqLEQ(tc.a, tc.b) != tc.leq {
			t.Errorf("%#x vs %#x: lt %v leq %v, want %v %v", tc.a, tc.b, seqLT(tc.a, tc.b), seqLEQ(tc.a, tc.b), tc.lt, tc.leq)
		}
	}
}
