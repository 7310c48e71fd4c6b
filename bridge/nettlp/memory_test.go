package nettlp

import (
	"bytes"
	"errors"
	"sync"
	"testing"
)

// mapMemory is an AddrMemory like the emulator's: no errors, no locking.
type mapMemory map[uint64]byte

func (m mapMemory) Read(addr uint64, dst []byte) {
	for i := range dst {
		dst[i] = m[addr+uint64(i)]
	}
}

func (m mapMemory) Write(addr uint64, src []byte) {
	for i, b := range src {
		m[addr+uint64(i)] = b
	}
}

func TestBoundedMemory(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	mem, err := Bounded(mapMemory{}, 0x1000, 0x100, &mu)
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.WriteAt([]byte{1, 2, 3}, 0x10fd); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 3)
	if err := mem.ReadAt(got, 0x10fd); err != nil || !bytes.Equal(got, []byte{1, 2, 3}) {
		t.Fatalf("% x, %v", got, err)
	}
	for _, a := range []uint64{0xfff, 0x10fe, 1<<64 - 2} {
		if err := mem.WriteAt([]byte{9, 9, 9}, a); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("write at %#x: %v", a, err)
		}
		if err := mem.ReadAt(got, a); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("read at %#x: %v", a, err)
		}
	}
	if _, err := Bounded(nil, 0, 1, nil); !errors.Is(err, ErrConfig) {
		t.Error("nil memory accepted")
	}
	// Served through a Completer with the lock.
	c, _ := NewCompleter(CompleterConfig{}, mem, 0, nil)
	cpls, err := serve(t, c, libtlpMRd(0x10fd, 3, 1))
	if err != nil || len(cpls) != 1 || !bytes.Equal(cpls[0][12+1:12+4], []byte{1, 2, 3}) {
		t.Fatalf("% x, %v", cpls, err)
	}
}

func TestSparseMemory(t *testing.T) {
	t.Parallel()
	m, err := NewSparseMemory(0xfff, 0x2002, func(a uint64) byte { return byte(a) })
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if err := m.ReadAt(got, 0xfff); err != nil || !bytes.Equal(got, []byte{0xff, 0, 1, 2}) {
		t.Fatalf("fill read % x, %v", got, err)
	}
	if err := m.WriteAt([]byte{0xaa, 0xbb}, 0x1fff); err != nil || m.Pages() != 2 {
		t.Fatalf("cross-page write: %v, %d pages", err, m.Pages())
	}
	if err := m.ReadAt(got, 0x1ffe); err != nil || !bytes.Equal(got, []byte{0xfe, 0xaa, 0xbb, 0x01}) {
		t.Fatalf("read back % x, %v", got, err)
	}
	if err := m.ReadAt(got, 0x2ffe); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("read past the end: %v", err)
	}
	if err := m.ReadAt(got[:3], 0x2ffe); err != nil {
		t.Fatalf("read up to the end: %v", err)
	}
	if _, err := NewSparseMemory(1<<64-1, 2, nil); err == nil {
		t.Fatal("wrapping memory accepted")
	}
}
