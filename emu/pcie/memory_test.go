package pcie

import (
	"bytes"
	"testing"
)

func TestMemorySparseCopyFill(t *testing.T) {
	t.Parallel()
	a, b := NewMemory(), NewMemory()
	data := make([]byte, 3*pageSize+123)
	for i := range data {
		data[i] = byte(i*7 + 1)
	}
	a.Write(pageSize-50, data)
	b.Fill(10, 0xee, 5*pageSize) // gets partly overwritten below
	a.Copy(b, 77, pageSize-50, uint64(len(data)))
	got := make([]byte, len(data))
	b.Read(77, got)
	if !bytes.Equal(got, data) {
		t.Fatal("copy lost data")
	}
	// Copying untouched memory over filled memory zeroes it.
	a.Copy(b, 0, 100*pageSize, 2*pageSize)
	z := make([]byte, 2*pageSize)
	b.Read(0, z)
	if !bytes.Equal(z, make([]byte, 2*pageSize)) {
		t.Fatal("copy of zeros left old data")
	}
	before := b.Pages()
	b.Fill(200*pageSize, 0, 10*pageSize)
	if b.Pages() != before {
		t.Fatal("zero fill of untouched memory allocated pages")
	}
	b.Fill(3, 0x5a, 2)
	var two [4]byte
	b.Read(2, two[:])
	if two != [4]byte{0, 0x5a, 0x5a, 0} {
		t.Fatalf("fill: %x", two)
	}
}

func TestRunUntilStopsAtCancelledHead(t *testing.T) {
	t.Parallel()
	s := newSim()
	tm := s.After(1000, func() {})
	late := false
	s.After(1000000, func() { late = true })
	tm.Stop()
	RunUntil(s, 10000)
	if s.Now() != 10000 || late {
		t.Fatalf("clock at %v, late event ran: %v", s.Now(), late)
	}
}

// TestMemoryWriteAllocatesOnAnyNonZeroByte writes TLP-sized chunks of
// zeros with one non-zero byte at every position: each must allocate its
// page and read back, while an all-zero chunk allocates nothing.
func TestMemoryWriteAllocatesOnAnyNonZeroByte(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 7, 8, 9, 256, 4096, pageSize} {
		m := NewMemory()
		m.Write(5*pageSize, make([]byte, n))
		if m.Pages() != 0 {
			t.Fatalf("%d zero bytes allocated %d pages", n, m.Pages())
		}
		for i := 0; i < n; i += max(1, n/97) {
			m := NewMemory()
			b := make([]byte, n)
			b[i] = 0x80
			m.Write(5*pageSize, b)
			if m.Pages() != 1 {
				t.Fatalf("%d bytes with a non-zero byte at %d: %d pages, want 1", n, i, m.Pages())
			}
			got := make([]byte, n)
			m.Read(5*pageSize, got)
			if !bytes.Equal(got, b) {
				t.Fatalf("%d bytes with a non-zero byte at %d read back differently", n, i)
			}
		}
	}
}

// BenchmarkMemoryWriteZeros is a completion's worth of zeros written to
// untouched memory: the check that no page is needed is all it costs.
func BenchmarkMemoryWriteZeros(b *testing.B) {
	m := NewMemory()
	src := make([]byte, 256)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		m.Write(uint64(i%4096)*256, src)
	}
}
