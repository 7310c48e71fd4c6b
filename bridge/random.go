package bridge

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
)

// random returns 32 random bits for session nonces and initial sequence
// numbers: from crypto/rand, unless Config.Seed asks for a reproducible
// sequence (simulations in virtual time). Predictable values would let an
// attacker who saw nothing guess the next session's numbers.
func (b *Bridge) random() uint32 {
	if b.cfg.Seed == 0 {
		var x [4]byte
		_, _ = rand.Read(x[:]) // never fails (crypto/rand crashes the program instead)
		return binary.BigEndian.Uint32(x[:])
	}
	b.rng += 0x9e3779b97f4a7c15
	z := b.rng
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return uint32(z ^ z>>31)
}

// randomBytes fills p like random.
func (b *Bridge) randomBytes(p []byte) {
	if b.cfg.Seed == 0 {
		_, _ = rand.Read(p)
		return
	}
	for i := 0; i < len(p); i += 4 {
		var x [4]byte
		binary.BigEndian.PutUint32(x[:], b.random())
		copy(p[i:], x[:])
	}
}

// seededBootID is the seal's boot ID of a bridge with a Seed: reproducible
// like the rest, from its own stream so that the session nonces and ISNs a
// seed gives stay what they were. Without a Seed the seal draws it from
// crypto/rand.
func seededBootID(cfg *Config) *bytes.Reader {
	z := cfg.Seed ^ 0xb0071d0000000000 ^ uint64(cfg.Role)<<48 ^ uint64(cfg.PairID)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return bytes.NewReader(binary.BigEndian.AppendUint64(nil, z^z>>31))
}
