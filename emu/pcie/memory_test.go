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
