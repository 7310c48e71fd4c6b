package guest

import (
	"errors"
	"testing"
)

// TestPagemapEntry: the frame number of a present page, and errors for a
// missing page or a hidden frame number.
func TestPagemapEntry(t *testing.T) {
	t.Parallel()
	if pa, err := physFromPagemap(1<<63 | 0x12345); err != nil || pa != 0x12345000 {
		t.Fatalf("present: %#x %v", pa, err)
	}
	if _, err := physFromPagemap(0x12345); !errors.Is(err, ErrNoBusAddress) {
		t.Fatalf("not present: %v", err)
	}
	if _, err := physFromPagemap(1 << 63); !errors.Is(err, ErrNoBusAddress) {
		t.Fatalf("hidden: %v", err)
	}
	// Soft-dirty and exclusive bits (55, 56) are not part of the frame.
	if pa, _ := physFromPagemap(1<<63 | 1<<56 | 1<<55 | 7); pa != 7*4096 {
		t.Fatalf("flag bits leaked into %#x", pa)
	}
}

// TestChunks: a transfer splits where hugepages are not adjacent and
// merges where they are.
func TestChunks(t *testing.T) {
	t.Parallel()
	const H = HugePage
	bus := []uint64{10 * H, 11 * H, 40 * H, 3 * H}
	got := chunks(bus, H/2, 3*H)
	want := []Chunk{{Off: H / 2, Bus: 10*H + H/2, Len: H + H/2}, {Off: 2 * H, Bus: 40 * H, Len: H}, {Off: 3 * H, Bus: 3 * H, Len: H / 2}}
	if len(got) != len(want) {
		t.Fatalf("%+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("chunk %d %+v, want %+v", i, got[i], want[i])
		}
	}
	d := &DMA{mem: make([]byte, 4*H), bus: bus}
	if _, err := d.Chunks(3*H, H+1); err == nil {
		t.Fatal("a range past the buffer was cut")
	}
	if d.Bus(2*H+5) != 40*H+5 {
		t.Fatalf("Bus %#x", d.Bus(2*H+5))
	}
}

// TestHostMemory: the driver's allocations never straddle a hugepage,
// loads and stores go to the page holding the bus address, and addresses
// outside every registered page are errors.
func TestHostMemory(t *testing.T) {
	t.Parallel()
	const H = HugePage
	arena := &DMA{mem: make([]byte, 2*H), bus: []uint64{7 * H, 2 * H}}
	h := &Host{pages: map[uint64]hostPage{}, arena: arena}
	h.Register(arena)
	a, err := h.Alloc(H-4096, 4096)
	if err != nil || a != 7*H {
		t.Fatalf("first %#x %v", a, err)
	}
	b, err := h.Alloc(8192, 4096) // does not fit in the rest of page 0
	if err != nil || b != 2*H {
		t.Fatalf("second %#x %v, want the start of the next page", b, err)
	}
	if _, err := h.Alloc(H, 4096); err == nil {
		t.Fatal("the arena gave more than it has")
	}
	if err := h.WriteMem(b+8, []byte{1, 2, 3, 4, 5, 6, 7, 8}); err != nil {
		t.Fatal(err)
	}
	var p [8]byte
	if err := h.ReadMem(b+8, p[:]); err != nil || p != [8]byte{1, 2, 3, 4, 5, 6, 7, 8} || arena.mem[H+8] != 1 {
		t.Fatalf("read back % x (%v)", p, err)
	}
	if err := h.WriteMem(9*H, p[:]); err == nil {
		t.Fatal("a store outside the host's memory")
	}
	if err := h.ReadMem(8*H-4, p[:]); err == nil {
		t.Fatal("a load across the end of a page")
	}
}

// TestPattern: the fill has no repeated words over a copy's size, so a
// chunk landing in the wrong place shows.
func TestPattern(t *testing.T) {
	t.Parallel()
	b := make([]byte, 1<<20)
	fillPattern(b, 12345)
	seen := map[[8]byte]bool{}
	for i := 0; i < len(b); i += 8 {
		w := [8]byte(b[i : i+8])
		if seen[w] {
			t.Fatalf("word at %d repeats", i)
		}
		seen[w] = true
	}
}
