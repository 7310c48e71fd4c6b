package seal

import (
	"encoding/binary"
	"fmt"

	"github.com/dxpu/dxpu/tlp/encap"
)

// FlagSealed is bit 3 of the dxpu header's flags nibble (byte 0): the body
// is a security header, the (encrypted) plaintext body and a tag.
const FlagSealed uint8 = 1 << 3

// Sizes of the sealed layout.
const (
	SecHeaderLen = 12                             // security header after the 40-byte dxpu header
	TagLen       = 16                             // AES-GCM / GMAC tag at the end of the body
	Overhead     = SecHeaderLen + TagLen          // bytes a sealed body adds to the plaintext body
	MaxBody      = 0xffff - Overhead              // largest plaintext body that can be sealed
	adLen        = encap.HeaderLen + SecHeaderLen // additional data: dxpu header + security header
)

// Offsets from the start of the dxpu header.
const (
	offEpoch = encap.HeaderLen + 0 // key epoch, low 8 bits
	offKind  = encap.HeaderLen + 1 // mode (bits 1:0), handshake key (bit 7)
	offEcho  = encap.HeaderLen + 2 // low 8 bits of the newest epoch the sender authenticated from us
	offGen   = encap.HeaderLen + 3 // pair key generation, low 8 bits
	offPN    = encap.HeaderLen + 4 // 64-bit packet number, big-endian
	offBody  = encap.HeaderLen + SecHeaderLen
)

// Bits of the kind byte (offset 41).
const (
	kindModeMask  uint8 = 0x03
	kindHandshake uint8 = 0x80
	kindReserved  uint8 = 0x7c
)

// Mode is how a pair's frames are protected.
type Mode uint8

// Modes, as carried in bits 1:0 of the security header's kind byte.
const (
	// ModeGCM encrypts the body with AES-256-GCM and authenticates it and
	// the headers: confidentiality and integrity.
	ModeGCM Mode = 1
	// ModeGMAC leaves the body in clear and authenticates it and the headers
	// (AES-256-GCM with everything as additional data and an empty
	// plaintext): integrity only, for fabrics where capture is not a threat
	// but forgery is, and for debugging with a plain packet capture.
	ModeGMAC Mode = 2
)

func (m Mode) String() string {
	switch m {
	case ModeGCM:
		return "aes-256-gcm"
	case ModeGMAC:
		return "aes-256-gmac"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// nonce builds the 96-bit AES-GCM nonce of a frame: the sender's role, the
// epoch's low 24 bits, the packet number.
func nonce(n *[12]byte, role encap.Role, epoch uint32, pn uint64) {
	n[0] = byte(role)
	n[1], n[2], n[3] = byte(epoch>>16), byte(epoch>>8), byte(epoch)
	binary.BigEndian.PutUint64(n[4:], pn)
}
