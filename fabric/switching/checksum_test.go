package switching_test

import (
	"testing"

	switching "github.com/dxpu/dxpu/fabric/switching"
)

// TestChecksumOddLengthAndCarries: an odd last byte is the high half of a
// word, and carries fold until none is left.
func TestChecksumOddLengthAndCarries(t *testing.T) {
	if got := switching.Checksum([]byte{0x01}, 0); got != 0xfeff {
		t.Errorf("Checksum(01) = %#04x, want 0xfeff", got)
	}
	if got := switching.Checksum([]byte{0x45, 0x00, 0x1c}, 0); got != ^uint16(0x4500+0x1c00) {
		t.Errorf("Checksum(45 00 1c) = %#04x, want %#04x", got, ^uint16(0x4500+0x1c00))
	}
	// 0x1ffff folds to 0x10000, which folds again to 0x0001.
	if got := switching.Checksum(nil, 0x1ffff); got != 0xfffe {
		t.Errorf("Checksum(seed 0x1ffff) = %#04x, want 0xfffe", got)
	}
}
