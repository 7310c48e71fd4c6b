package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/dxpu/dxpu/tlp/encap"
)

// KeyLen is the size of a pair key and of every derived key (AES-256).
const KeyLen = 32

// Session nonce sizes StartSession accepts.
const (
	MinNonceLen = 4
	MaxNonceLen = 32
)

// HKDF labels; the version in them changes with any change of derivation.
const (
	labelSession   = "dxpu-seal-v1 session"
	labelHandshake = "dxpu-seal-v1 handshake"
	labelKey       = "dxpu-seal-v1 key"
)

// sessionPRK is HKDF-Extract(SHA-256, salt, pair key) with the salt
// binding the pair, the key generation and both session nonces (host
// side's first), so every (re)start of either side yields unrelated keys.
func sessionPRK(key *[KeyLen]byte, pairID, gen uint32, host, gpu []byte) ([]byte, error) {
	salt := make([]byte, 0, len(labelSession)+7+2+len(host)+len(gpu))
	salt = append(salt, labelSession...)
	salt = appendPairGen(salt, pairID, gen)
	salt = append(salt, byte(len(host)))
	salt = append(salt, host...)
	salt = append(salt, byte(len(gpu)))
	salt = append(salt, gpu...)
	return hkdf.Extract(sha256.New, key[:], salt)
}

// handshakePRK binds only the pair and generation: the handshake key
// outlives sessions (it seals the HELLOs that carry the nonces).
func handshakePRK(key *[KeyLen]byte, pairID, gen uint32) ([]byte, error) {
	salt := appendPairGen([]byte(labelHandshake), pairID, gen)
	return hkdf.Extract(sha256.New, key[:], salt)
}

func appendPairGen(b []byte, pairID, gen uint32) []byte {
	b = append(b, byte(pairID>>16), byte(pairID>>8), byte(pairID))
	return binary.BigEndian.AppendUint32(b, gen)
}

// expandAEAD derives the key one sender uses in one epoch,
// HKDF-Expand(prk, label | role | mode | epoch, 32), and builds its AEAD.
// Each direction, mode and epoch thus has its own key.
func expandAEAD(prk []byte, role encap.Role, mode Mode, epoch uint32) (cipher.AEAD, error) {
	return expandAEADNonce(prk, role, mode, epoch, 12)
}

// expandHandshakeAEAD is the handshake key of a sender role (epoch 0 of
// the handshake PRK) with its 17-byte nonce (handshakeNonce).
func expandHandshakeAEAD(prk []byte, role encap.Role, mode Mode) (cipher.AEAD, error) {
	return expandAEADNonce(prk, role, mode, 0, HandshakeNonceLen)
}

func expandAEADNonce(prk []byte, role encap.Role, mode Mode, epoch uint32, nonceLen int) (cipher.AEAD, error) {
	var info [len(labelKey) + 6]byte
	n := copy(info[:], labelKey)
	info[n], info[n+1] = byte(role), byte(mode)
	binary.BigEndian.PutUint32(info[n+2:], epoch)
	k, err := hkdf.Expand(sha256.New, prk, string(info[:]), KeyLen)
	if err != nil {
		return nil, fmt.Errorf("seal: expand key for %v epoch %d: %w", role, epoch, err)
	}
	blk, err := aes.NewCipher(k)
	clear(k)
	if err != nil {
		return nil, fmt.Errorf("seal: AES key: %w", err)
	}
	var aead cipher.AEAD
	if nonceLen == 12 {
		aead, err = cipher.NewGCM(blk)
	} else {
		aead, err = cipher.NewGCMWithNonceSize(blk, nonceLen)
	}
	if err != nil {
		return nil, fmt.Errorf("seal: GCM: %w", err)
	}
	return aead, nil
}
