package seal

import (
	"encoding/binary"
	"fmt"

	"github.com/dxpu/dxpu/tlp/encap"
)

// FlagSealed is bit 3 of the dxpu header's flags nibble (byte 0): the body
// is a security header, the (encrypted) plaintext body and a tag.
const FlagSealed uint8 = 1 << 3

// Sealed reports whether frame (from the dxpu header on) says it is
// sealed: a dxpu v1 header with FlagSealed, its body the seal's rather
// than TLPs. It checks the header only; Open and Unseal check the rest.
func Sealed(frame []byte) bool {
	if len(frame) < encap.HeaderLen {
		return false
	}
	h := encap.Header(frame)
	return h.Version() == encap.Version && h.Flags()&FlagSealed != 0
}

// Sizes of the sealed layout.
const (
	SecHeaderLen = 12                             // security header after the 40-byte dxpu header
	TagLen       = 16                             // AES-GCM / GMAC tag at the end of the body
	Overhead     = SecHeaderLen + TagLen          // bytes a sealed body adds to the plaintext body
	MaxBody      = 0xffff - Overhead              // largest plaintext body that can be sealed
	adLen        = encap.HeaderLen + SecHeaderLen // additional data: dxpu header + security header

	// BootIDLen is the sender's boot ID, which a handshake frame's
	// security header carries after the packet number: 8 random bytes a
	// Channel draws when it is built, so that no two boots of a sender
	// share a handshake nonce whatever its clock does.
	BootIDLen = 8
	// HandshakeSecHeaderLen is the security header of a frame under the
	// handshake key: the 12 bytes of every sealed frame and the boot ID.
	HandshakeSecHeaderLen = SecHeaderLen + BootIDLen
	// HandshakeOverhead is what sealing adds to a handshake frame's body.
	HandshakeOverhead = HandshakeSecHeaderLen + TagLen
	// HandshakeNonceLen is the AES-GCM nonce under the handshake key: the
	// sender's role, its boot ID and the packet number (17 bytes; GCM
	// hashes a nonce of other than 12 bytes into its first counter block).
	HandshakeNonceLen = 1 + BootIDLen + 8
	adLenHS           = encap.HeaderLen + HandshakeSecHeaderLen
)

// Offsets from the start of the dxpu header.
const (
	offEpoch  = encap.HeaderLen + 0 // key epoch, low 8 bits
	offKind   = encap.HeaderLen + 1 // mode (bits 1:0), handshake key (bit 7)
	offEcho   = encap.HeaderLen + 2 // low 8 bits of the newest epoch the sender authenticated from us
	offGen    = encap.HeaderLen + 3 // pair key generation, low 8 bits
	offPN     = encap.HeaderLen + 4 // 64-bit packet number, big-endian
	offBody   = encap.HeaderLen + SecHeaderLen
	offBoot   = encap.HeaderLen + SecHeaderLen // handshake frames: the sender's boot ID
	offHSBody = offBoot + BootIDLen            // handshake frames: the body
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

// sessionNonce builds the 96-bit AES-GCM nonce of a session frame: the
// sender's role, the epoch's low 24 bits, the packet number.
func sessionNonce(n *[12]byte, role encap.Role, epoch uint32, pn uint64) {
	n[0] = byte(role)
	n[1], n[2], n[3] = byte(epoch>>16), byte(epoch>>8), byte(epoch)
	binary.BigEndian.PutUint64(n[4:], pn)
}

// handshakeNonce builds the nonce of a frame under the handshake key: the
// sender's role, its boot ID, the packet number. Packet numbers strictly
// increase within one boot and boots differ in their random IDs, so the
// nonce never repeats under the handshake key, which a static pair key
// keeps the same across restarts, even when the wall clock the packet
// numbers follow was set back in between.
func handshakeNonce(n *[HandshakeNonceLen]byte, role encap.Role, boot []byte, pn uint64) {
	n[0] = byte(role)
	copy(n[1:1+BootIDLen], boot)
	binary.BigEndian.PutUint64(n[1+BootIDLen:], pn)
}
