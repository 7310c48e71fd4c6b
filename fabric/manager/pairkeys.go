package manager

import (
	"crypto/rand"
	"fmt"
	"sync"
	"time"
)

// PairKeySize is the length of a pair key: AES-256 (package bridge/seal).
const PairKeySize = 32

// PairKey is the secret both bridges of a pair seal their frames with. The
// manager draws a fresh one from crypto/rand every time it programs a pair
// (allocation, re-application after a restart, rekey), hands it to the two
// agents over the agent API (https, each with its own credential) and keeps
// it nowhere else: not in the store, not in any API answer, not in a log.
// Generation numbers the key so that a bridge told the same pair again
// installs the new key as a lossless key change (bridge.Runner.InstallKey)
// instead of restarting the pair.
type PairKey struct {
	Generation uint32
	Key        [PairKeySize]byte
}

// IsZero reports whether no key was issued.
func (k PairKey) IsZero() bool { return k == PairKey{} }

// String never shows the key.
func (k PairKey) String() string {
	if k.IsZero() {
		return "no key"
	}
	return fmt.Sprintf("key generation %d", k.Generation)
}

// keyIssuer draws pair keys with increasing generations. A generation is
// at least the Unix time in seconds, so a restarted manager's keys come
// after the ones its bridges hold (agents install a key only over an older
// generation; they restart a pair whose key they cannot install).
type keyIssuer struct {
	mu  sync.Mutex
	gen uint32
	now func() time.Time
}

func newKeyIssuer() (*keyIssuer, error) {
	return &keyIssuer{now: time.Now}, nil
}

func (k *keyIssuer) issue() (PairKey, error) {
	var pk PairKey
	if _, err := rand.Read(pk.Key[:]); err != nil {
		return PairKey{}, fmt.Errorf("manager: pair key: %w", err)
	}
	k.mu.Lock()
	k.gen = max(k.gen+1, uint32(k.now().Unix()))
	pk.Generation = k.gen
	k.mu.Unlock()
	return pk, nil
}

// withKeys gives every pair a fresh key.
func (m *Manager) withKeys(pairs []Pair) ([]Pair, error) {
	for i := range pairs {
		k, err := m.keys.issue()
		if err != nil {
			return nil, err
		}
		pairs[i].Key = k
	}
	return pairs, nil
}
