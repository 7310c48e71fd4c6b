package manager

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"

	"github.com/dxpu/dxpu/fabric/store"
)

// PairKeySize is the length of a pair key: AES-256 (package bridge/seal).
const PairKeySize = 32

// PairKey is the secret both bridges of a pair seal their frames with. The
// manager draws a fresh one from crypto/rand for a new pair, for every
// rekey and, after its own restart, for every active pair; it hands it to
// the pair's two agents over the agent API (https, each with its own
// credential) and keeps it in memory only: not in the store, not in any
// API answer, not in a log. Generation numbers the key per pair (a
// counter the store keeps: see keyBook) so that a bridge told the same
// pair again installs the new key as a lossless key change
// (bridge.Runner.InstallKey) instead of restarting the pair.
type PairKey struct {
	Generation uint32
	Key        [PairKeySize]byte
	// Pending asks the agent to install the key next to the one in use
	// without switching to it: the first phase of a key change (KEY-8).
	// Programming the same key without Pending then switches.
	Pending bool
}

// IsZero reports whether no key was issued.
func (k PairKey) IsZero() bool { return k.Generation == 0 && k.Key == [PairKeySize]byte{} }

// Same reports whether k and o are the same key (Pending aside).
func (k PairKey) Same(o PairKey) bool { return k.Generation == o.Generation && k.Key == o.Key }

// String never shows the key.
func (k PairKey) String() string {
	if k.IsZero() {
		return "no key"
	}
	return fmt.Sprintf("key generation %d", k.Generation)
}

// ErrGenerationsExhausted: a pair used up its 2^32-1 key generations (at
// one rekey a second, after 136 years); release and allocate again.
var ErrGenerationsExhausted = errors.New("pair key generations used up")

// keyGenKey is the store key of a pair's generation counter.
func keyGenKey(pair uint32) string { return keyKeyGen + strconv.FormatUint(uint64(pair), 10) }

// keyBook is the manager's record of pair keys (KEY-9..KEY-12 in
// docs/protocol.md). Generations come from a per-pair counter persisted
// in the store before a key under it leaves the manager, so they strictly
// increase per pair across restarts and leader changes, are never issued
// twice, and follow no clock. The keys themselves are kept in memory only
// (a restarted manager issues every active pair a new one, two-phase):
// the store is not encrypted at rest, and a key that is never written
// cannot leak from a backup of it.
type keyBook struct {
	mu   sync.Mutex
	gens map[uint32]uint32  // last issued generation per pair, as stored
	cur  map[uint32]PairKey // the key both ends hold and use
	next map[uint32]PairKey // a key change under way: installed at zero, one or both ends
	due  map[uint32]bool    // a key change to finish (retried by the reconciler)
	held map[uint32]uint32  // the newest generation an agent listed as held
}

func newKeyBook() *keyBook {
	k := &keyBook{}
	k.reset()
	return k
}

// reset forgets everything: a new leader reads the counters again.
func (k *keyBook) reset() {
	k.mu.Lock()
	k.gens, k.cur, k.next, k.due = map[uint32]uint32{}, map[uint32]PairKey{}, map[uint32]PairKey{}, map[uint32]bool{}
	k.held = map[uint32]uint32{}
	k.mu.Unlock()
}

type storedGen struct {
	Generation uint32 `json:"generation"`
}

// issueKey draws a fresh key for pair under the next generation, which it
// persists first: a generation the store does not hold is never sent.
func (m *Manager) issueKey(ctx context.Context, pair uint32) (PairKey, error) {
	ks, err := m.issueKeys(ctx, []uint32{pair})
	if err != nil {
		return PairKey{}, err
	}
	return ks[0], nil
}

// issueKeys is issueKey for several pairs with one store write: a new
// allocation's pairs cost one transaction (one fsync with bbolt, one
// round of consensus with etcd), not one each.
func (m *Manager) issueKeys(ctx context.Context, pairs []uint32) ([]PairKey, error) {
	k := m.keys
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]PairKey, len(pairs))
	ops := make([]store.Op, 0, len(pairs))
	for i, pair := range pairs {
		last, ok := k.gens[pair]
		if !ok {
			b, err := m.cfg.Store.Get(ctx, keyGenKey(pair))
			switch {
			case err == nil:
				var sg storedGen
				if err := json.Unmarshal(b, &sg); err != nil {
					return nil, fmt.Errorf("manager: stored key generation of pair %d: %w", pair, err)
				}
				last = sg.Generation
			case !errors.Is(err, store.ErrNotFound):
				return nil, fmt.Errorf("manager: read key generation of pair %d: %w", pair, err)
			}
		}
		// Above what an agent holds: a store that lost the counter, or
		// keys an older manager numbered by the clock, never make a key
		// refused.
		last = max(last, k.held[pair])
		if last == math.MaxUint32 {
			return nil, fmt.Errorf("manager: pair %d: %w", pair, ErrGenerationsExhausted)
		}
		out[i] = PairKey{Generation: last + 1}
		if _, err := rand.Read(out[i].Key[:]); err != nil {
			return nil, fmt.Errorf("manager: pair key: %w", err)
		}
		ops = append(ops, putJSON(keyGenKey(pair), storedGen{out[i].Generation}))
	}
	if err := m.cfg.Store.Apply(ctx, ops...); err != nil {
		for _, pair := range pairs {
			delete(k.gens, pair) // unknown whether it was written: read it again next time
		}
		return nil, fmt.Errorf("manager: persist key generations of pairs %v: %w", pairs, err)
	}
	for i, pair := range pairs {
		k.gens[pair] = out[i].Generation
	}
	return out, nil
}

// prepareKeys issues, in writes of up to 64 counters, the next key of
// every pair in ids that holds neither a current key nor a change under
// way, and records it as that pair's pending change: a manager taking the
// lead re-keys every active pair, and one write per pair (an fsync each
// with bbolt) made a restart with 4,869 GPUs lent take 23 s. changeKey
// then uses the pending key. A failure leaves changeKey to issue its own.
func (m *Manager) prepareKeys(ctx context.Context, ids []uint32) error {
	k := m.keys
	const chunk = 64
	for len(ids) > 0 {
		n := min(chunk, len(ids))
		var need []uint32
		k.mu.Lock()
		for _, id := range ids[:n] {
			_, pending := k.next[id]
			_, haveCur := k.cur[id]
			if !pending && !haveCur {
				need = append(need, id)
			}
		}
		k.mu.Unlock()
		ids = ids[n:]
		if len(need) == 0 {
			continue
		}
		ks, err := m.issueKeys(ctx, need)
		if err != nil {
			return err
		}
		k.mu.Lock()
		for i, id := range need {
			_, pending := k.next[id]
			_, haveCur := k.cur[id]
			if !pending && !haveCur {
				k.next[id] = ks[i]
			}
		}
		k.mu.Unlock()
	}
	return nil
}

// observe notes the generation an agent listed for a pair. A pending key
// below it would be refused: the change is retried with a new one.
func (k *keyBook) observe(pair, held uint32) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if held <= k.held[pair] {
		return
	}
	k.held[pair] = held
	n, hasNext := k.next[pair]
	if hasNext && n.Generation < held {
		delete(k.next, pair)
		hasNext = false
	}
	if c, ok := k.cur[pair]; ok && c.Generation < held && (!hasNext || n.Generation != held) {
		// An end holds a generation this manager did not issue to it:
		// its key is unknown here, so the pair moves to a new one.
		delete(k.cur, pair)
		k.due[pair] = true
	}
}

func (k *keyBook) current(pair uint32) (PairKey, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	c, ok := k.cur[pair]
	return c, ok && !k.due[pair]
}

func (k *keyBook) setCurrent(pair uint32, pk PairKey) {
	k.mu.Lock()
	k.cur[pair] = pk
	delete(k.next, pair)
	k.mu.Unlock()
}

// forget drops a released pair's keys (its generation counter stays).
func (k *keyBook) forget(pairs []Pair) {
	k.mu.Lock()
	for _, p := range pairs {
		delete(k.cur, p.ID)
		delete(k.next, p.ID)
		delete(k.due, p.ID)
	}
	k.mu.Unlock()
}

func (k *keyBook) setDue(pair uint32, due bool) {
	k.mu.Lock()
	if due {
		k.due[pair] = true
	} else {
		delete(k.due, pair)
	}
	k.mu.Unlock()
}

func (k *keyBook) isDue(pair uint32) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.due[pair]
}

// changeKey moves both ends of a pair to a new key in two phases
// (KEY-8, KEY-10): both agents install it next to the key in use, then
// both switch. Until both have installed it neither sends under it, so a
// failure at either end leaves the old key working at both; the change
// stays due and the reconciler retries it with the same key. With fresh
// set (ctl rekey) a key is drawn even if a change was pending. The
// agents also create an end that lost the pair, under the new key.
func (m *Manager) changeKey(ctx context.Context, pr Pair, fresh bool) error {
	k := m.keys
	k.mu.Lock()
	next, pending := k.next[pr.ID]
	cur, haveCur := k.cur[pr.ID]
	k.due[pr.ID] = true
	k.mu.Unlock()
	switch {
	case pending && !fresh:
	case !fresh && haveCur:
		// Both ends installed cur; only the switch may be missing.
		next = cur
	default:
		var err error
		if next, err = m.issueKey(ctx, pr.ID); err != nil {
			return err
		}
		k.mu.Lock()
		k.next[pr.ID] = next
		k.mu.Unlock()
	}
	pr.Key = next
	pr.Key.Pending = true
	if err := m.do(ctx, StepGPUBridge, pr); err != nil {
		return &StepError{Step: StepGPUBridge, Pair: pr.ID, Err: fmt.Errorf("install %v: %w", next, err)}
	}
	if err := m.do(ctx, StepHostBridge, pr); err != nil {
		return &StepError{Step: StepHostBridge, Pair: pr.ID, Err: fmt.Errorf("install %v: %w", next, err)}
	}
	// Both ends hold it: it is the pair's key from here, whichever end
	// switches first (the other follows when it sees it: KEY-8).
	k.setCurrent(pr.ID, next)
	pr.Key.Pending = false
	if err := m.do(ctx, StepGPUBridge, pr); err != nil {
		return &StepError{Step: StepGPUBridge, Pair: pr.ID, Err: fmt.Errorf("switch to %v: %w", next, err)}
	}
	if err := m.do(ctx, StepHostBridge, pr); err != nil {
		return &StepError{Step: StepHostBridge, Pair: pr.ID, Err: fmt.Errorf("switch to %v: %w", next, err)}
	}
	k.setDue(pr.ID, false)
	return nil
}
