package tlp

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// specECRC follows the specification's description literally, bit by bit:
// a 32-bit register seeded with all ones, polynomial 04C1 1DB7h applied
// MSB-first (a Galois LFSR), every byte entered bit 0 first, the variant
// bits (Type[0], EP) taken as 1; the remainder is complemented and each of
// its bytes bit-swapped, bits 31:24 going into the first digest byte. It
// shares no code with ComputeECRC (which leans on hash/crc32's reflected
// table) and checks the claim that the two agree.
func specECRC(tlp []byte) [4]byte {
	reg := uint32(0xffffffff)
	for i, b := range tlp {
		switch i {
		case 0:
			b |= 0x01
		case 2:
			b |= 0x40
		}
		for k := 0; k < 8; k++ {
			in := uint32(b>>k) & 1
			top := reg >> 31
			reg <<= 1
			if top^in == 1 {
				reg ^= 0x04C11DB7
			}
		}
	}
	reg = ^reg
	var d [4]byte
	for j := 0; j < 4; j++ {
		d[j] = bits.Reverse8(uint8(reg >> (24 - 8*j)))
	}
	return d
}

func TestECRCMatchesSpecAlgorithm(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 200; n++ {
		b := make([]byte, 12+4*r.IntN(40))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		want := specECRC(b)
		var got [4]byte
		binary.BigEndian.PutUint32(got[:], ComputeECRC(b))
		if got != want {
			t.Fatalf("len %d: ComputeECRC %x, spec algorithm %x", len(b), got, want)
		}
	}
}

// The bit-serial reference, without the variant-bit masking, must give the
// catalogue check value of CRC-32 (ISO-HDLC, the IEEE 802.3 FCS) for
// "123456789": 0xCBF43926, whose bytes go out least significant first.
// That pins down the bit ordering the reference (and so ComputeECRC)
// uses; masking then only changes the input.
func TestECRCKnownValue(t *testing.T) {
	t.Parallel()
	var le [4]byte
	binary.LittleEndian.PutUint32(le[:], 0xcbf43926)
	if d := specCRC32NoMask([]byte("123456789")); d != le {
		t.Fatalf("bit-serial CRC-32 of 123456789 = %x, catalogue %x", d, le)
	}
	// "1" already has Type[0] set; "3" lacks EP, so the masked input is
	// "12s456789" (0x33|0x40 = 0x73).
	want := specCRC32NoMask([]byte("12s456789"))
	var got [4]byte
	binary.BigEndian.PutUint32(got[:], ComputeECRC([]byte("123456789")))
	if got != want {
		t.Fatalf("ComputeECRC(123456789) = %x, want CRC-32(12s456789) = %x", got, want)
	}
}

// specCRC32NoMask is specECRC without the variant-bit masking: plain
// CRC-32 as the spec's LFSR computes it.
func specCRC32NoMask(b []byte) [4]byte {
	reg := uint32(0xffffffff)
	for _, x := range b {
		for k := 0; k < 8; k++ {
			in := uint32(x>>k) & 1
			top := reg >> 31
			reg <<= 1
			if top^in == 1 {
				reg ^= 0x04C11DB7
			}
		}
	}
	reg = ^reg
	var d [4]byte
	for j := 0; j < 4; j++ {
		d[j] = bits.Reverse8(uint8(reg >> (24 - 8*j)))
	}
	return d
}

func TestECRCEncodeVerify(t *testing.T) {
	t.Parallel()
	p := Packet{Kind: MWr, TD: true, RequesterID: 0x0100, Tag: 3, FirstBE: 0xf, LastBE: 0xf,
		Address: 0x1000, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}}
	b, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 12+8+4 {
		t.Fatalf("len %d", len(b))
	}
	v, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse of encoded TD TLP: %v", err)
	}
	want := specECRC(b[:20])
	if got := v.ECRC(); got != binary.BigEndian.Uint32(want[:]) {
		t.Errorf("digest %#08x, spec algorithm %x", got, want)
	}
	// Variant bits: setting EP (a switch poisoning the TLP) keeps the
	// ECRC valid.
	b2 := append([]byte(nil), b...)
	b2[2] |= 0x40
	if _, err := Parse(b2); err != nil {
		t.Errorf("EP set after ECRC: %v", err)
	}
	// Any other bit flip is caught.
	for _, i := range []int{0, 1, 3, 5, 11, 12, 19, 20, 23} {
		b3 := append([]byte(nil), b...)
		b3[i] ^= 0x10
		if i == 0 {
			b3[i] = b[i] ^ 0x20 // Fmt bit: 4DW, now a length error instead
		}
		_, err := Parse(b3)
		if err == nil {
			t.Errorf("flip in byte %d accepted", i)
		} else if i >= 12 && !errors.Is(err, ErrBadECRC) {
			t.Errorf("flip in byte %d: %v, want ErrBadECRC", i, err)
		}
	}
	// Type[0] is variant too: a CfgRd1 turned into CfgRd0 by a bridge.
	c := Packet{Kind: CfgRd1, TD: true, Length: 1, FirstBE: 0xf, TargetID: 0x0200, Register: 0x10}
	cb, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	cb[0] &^= 1
	if v, err := Parse(cb); err != nil || v.Kind() != CfgRd0 {
		t.Errorf("CfgRd1 -> CfgRd0 with the same ECRC: %v", err)
	}
}
