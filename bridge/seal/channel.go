package seal

import (
	"crypto/cipher"
	"crypto/rand"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/dxpu/dxpu/tlp/encap"
)

// Channel seals and opens one side's frames of one pair. It owns no
// goroutine, socket or clock and is not safe for concurrent use: the
// bridge that owns it calls it from its own loop.
type Channel struct {
	cfg Config

	keys   []*pairKey // retained generations: active, newest, the receive key's, the peer's latest
	active *pairKey   // the generation the sender uses for new keys and handshakes
	newest *pairKey   // the latest InstallKey (== active when no change is under way)

	// peerGen is the generation the peer is known to use: the first one,
	// then that of its latest authenticated frame. It is kept until the
	// peer is seen under another, because a peer that has not activated a
	// change yet seals its HELLOs under it, also after this side's session
	// ended.
	peerGen uint32

	session   bool
	nonceHost [MaxNonceLen]byte
	nonceGPU  [MaxNonceLen]byte
	lenHost   int
	lenGPU    int

	tx          txKey
	rekeyWanted bool // Rekey called, or a newer generation became active
	peerHolds   bool // the peer's echo is our epoch: it opens nothing older and holds the next
	rotated     bool // the receive key moved past the session's first

	slots    [maxNexts + 3]rxKey // cur, prev, the nexts and a spare
	cur      *rxKey              // the peer's current epoch
	prev     *rxKey              // the one before, until its grace ends; nil when retired
	now      time.Duration       // the owner's time, from Tick
	curSince time.Duration       // now when cur became current: prev's grace time runs from it
	nexts    [maxNexts]*rxKey    // the peer's possible next keys (see deriveNexts)
	hsNext   uint64              // next handshake packet number (at least the caller's clock)
	boot     [BootIDLen]byte     // this channel's boot ID, in its handshake frames and nonces
	nonceBuf [12]byte
	hsNonce  [HandshakeNonceLen]byte

	ctr Counters
}

// pairKey is one generation of the manager's pair key and what derives
// from it.
type pairKey struct {
	gen  uint32
	key  [KeyLen]byte
	prk  []byte      // session PRK; nil without a session
	hsTx cipher.AEAD // handshake key, this side sending
	hsRx rxKey       // handshake key, the peer sending, with its replay window
}

type txKey struct {
	aead  cipher.AEAD
	gen   uint32
	epoch uint32
	sent  uint64 // frames sealed = the next packet number
}

type rxKey struct {
	aead   cipher.AEAD
	gen    uint32
	epoch  uint32
	opened uint64 // frames authenticated
	win    window
}

// New builds a channel holding pair key generation gen (32 bytes, from the
// pair's manager). It can seal and open handshake frames at once; session
// frames need StartSession.
func New(cfg Config, gen uint32, key []byte) (*Channel, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Channel{cfg: cfg, keys: make([]*pairKey, 0, 4)}
	if cfg.Rand == nil {
		rand.Read(c.boot[:]) // never fails (Go 1.24+: it crashes the program instead)
	} else if _, err := io.ReadFull(cfg.Rand, c.boot[:]); err != nil {
		return nil, fmt.Errorf("%w: boot ID from Rand: %w", ErrConfig, err)
	}
	pk, err := c.newPairKey(gen, key)
	if err != nil {
		return nil, err
	}
	c.keys = append(c.keys, pk)
	c.active, c.newest, c.peerGen = pk, pk, gen
	c.ctr.KeysInstalled++
	return c, nil
}

func (c *Channel) newPairKey(gen uint32, key []byte) (*pairKey, error) {
	if len(key) != KeyLen {
		return nil, fmt.Errorf("%w: generation %d is %d bytes, want %d", ErrKey, gen, len(key), KeyLen)
	}
	pk := &pairKey{gen: gen}
	copy(pk.key[:], key)
	prk, err := handshakePRK(&pk.key, c.cfg.PairID, gen)
	if err != nil {
		return nil, fmt.Errorf("seal: handshake key generation %d: %w", gen, err)
	}
	c.logSecret(true, gen, prk)
	if pk.hsTx, err = expandHandshakeAEAD(prk, c.cfg.Role, c.cfg.Mode); err != nil {
		return nil, err
	}
	if pk.hsRx.aead, err = expandHandshakeAEAD(prk, c.cfg.peerRole(), c.cfg.Mode); err != nil {
		return nil, err
	}
	pk.hsRx.gen = gen
	if c.session {
		if pk.prk, err = c.sessionPRK(pk); err != nil {
			return nil, err
		}
		c.logSecret(false, gen, pk.prk)
	}
	return pk, nil
}

func (c *Channel) sessionPRK(pk *pairKey) ([]byte, error) {
	prk, err := sessionPRK(&pk.key, c.cfg.PairID, pk.gen, c.nonceHost[:c.lenHost], c.nonceGPU[:c.lenGPU])
	if err != nil {
		return nil, fmt.Errorf("seal: session key generation %d: %w", pk.gen, err)
	}
	return prk, nil
}

// StartSession derives fresh session keys from both sides' session nonces
// (this side's and the peer's, 4 to 32 random bytes each, as the handshake
// exchanged them) and starts both directions at epoch 0 with empty replay
// windows. Frames of any earlier session no longer open.
func (c *Channel) StartSession(local, peer []byte) error {
	for _, n := range [][]byte{local, peer} {
		if len(n) < MinNonceLen || len(n) > MaxNonceLen {
			return fmt.Errorf("%w: session nonce of %d bytes, want %d to %d", ErrConfig, len(n), MinNonceLen, MaxNonceLen)
		}
	}
	c.EndSession()
	host, gpu := local, peer
	if c.cfg.Role == encap.RoleGPU {
		host, gpu = peer, local
	}
	c.lenHost = copy(c.nonceHost[:], host)
	c.lenGPU = copy(c.nonceGPU[:], gpu)
	c.session = true
	for _, pk := range c.keys {
		prk, err := c.sessionPRK(pk)
		if err != nil {
			c.EndSession()
			return err
		}
		pk.prk = prk
		c.logSecret(false, pk.gen, prk)
	}
	aead, err := expandAEAD(c.active.prk, c.cfg.Role, c.cfg.Mode, 0)
	if err != nil {
		c.EndSession()
		return err
	}
	c.tx = txKey{aead: aead, gen: c.active.gen}
	// The peer's receive key starts at epoch 0 too: it already holds epoch 1.
	c.peerHolds = true
	c.cur = c.takeSlot()
	if err := c.fillRx(c.cur, c.active, 0); err != nil {
		c.EndSession()
		return err
	}
	c.deriveNexts()
	return nil
}

// EndSession forgets the session keys; session frames are refused
// (ErrNoSession) until the next StartSession. Handshake keys stay.
func (c *Channel) EndSession() {
	c.session = false
	for _, pk := range c.keys {
		clear(pk.prk)
		pk.prk = nil
	}
	c.tx = txKey{}
	c.rekeyWanted, c.peerHolds, c.rotated = false, false, false
	for i := range c.slots {
		c.slots[i].aead = nil
	}
	c.cur, c.prev, c.nexts = nil, nil, [maxNexts]*rxKey{}
	clear(c.nonceHost[:])
	clear(c.nonceGPU[:])
	c.gcKeys()
}

// InstallKey adds pair key generation gen (newer than every generation
// held). The receiver accepts the peer's frames under it at once; the
// sender moves to it at its next epoch once ActivateKey is called or the
// peer is seen using it. The manager's loss-free procedure is: install on
// both sides, then activate. Installing again before a change completed
// replaces the pending generation.
func (c *Channel) InstallKey(gen uint32, key []byte) error {
	if gen <= c.newest.gen {
		return fmt.Errorf("%w: generation %d is not newer than %d", ErrKey, gen, c.newest.gen)
	}
	for _, pk := range c.keys {
		if byte(pk.gen) == byte(gen) {
			return fmt.Errorf("%w: generation %d has the low byte of held generation %d: finish that change first", ErrKey, gen, pk.gen)
		}
	}
	pk, err := c.newPairKey(gen, key)
	if err != nil {
		return err
	}
	c.keys = append(c.keys, pk)
	c.newest = pk
	c.ctr.KeysInstalled++
	c.gcKeys()
	if c.session {
		c.deriveNexts()
	}
	return nil
}

// ActivateKey makes the newest generation the one the sender moves to at
// its next epoch, which it starts as soon as the peer holds its current one.
// Without a session the newest generation is used at once.
func (c *Channel) ActivateKey() {
	if c.active == c.newest {
		return
	}
	c.activate()
}

func (c *Channel) activate() {
	c.active = c.newest
	c.ctr.KeyActivations++
	if c.session && c.tx.gen != c.active.gen {
		c.rekeyWanted = true
	}
	c.gcKeys()
}

// Rekey asks the sender to move to a new epoch: at the next Seal if the
// peer's echo allows it, else as soon as it does. Calls before that move
// coalesce.
func (c *Channel) Rekey() {
	if c.session {
		c.rekeyWanted = true
	}
}

// gcKeys drops generations nothing needs: the sender's active one, the
// newest, the one the current receive key came from and the one the peer
// last used stay.
func (c *Channel) gcKeys() {
	kept := c.keys[:0]
	for _, pk := range c.keys {
		if pk == c.active || pk == c.newest || (c.cur != nil && pk.gen == c.cur.gen) || pk.gen == c.peerGen {
			kept = append(kept, pk)
			continue
		}
		clear(pk.key[:])
		clear(pk.prk)
	}
	clear(c.keys[len(kept):])
	c.keys = kept
}

func (c *Channel) keyFor(genByte byte) *pairKey {
	for _, pk := range c.keys {
		if byte(pk.gen) == genByte {
			return pk
		}
	}
	return nil
}

// takeSlot returns a receive slot no pointer refers to, reset.
func (c *Channel) takeSlot() *rxKey {
	for i := range c.slots {
		s := &c.slots[i]
		if s == c.cur || s == c.prev || slices.Contains(c.nexts[:], s) {
			continue
		}
		*s = rxKey{}
		return s
	}
	panic("seal: receive slots exhausted") // unreachable: one more slot than cur, prev and the nexts
}

func (c *Channel) fillRx(s *rxKey, pk *pairKey, epoch uint32) error {
	aead, err := expandAEAD(pk.prk, c.cfg.peerRole(), c.cfg.Mode, epoch)
	if err != nil {
		return err
	}
	*s = rxKey{aead: aead, gen: pk.gen, epoch: epoch}
	return nil
}

// maxNexts bounds the keys the peer may move to next: the next epoch
// under each of up to 4 retained generations, and before the session's
// first move also the current epoch under the 3 others.
const maxNexts = 7

// deriveNexts prepares the keys the peer may move to next: the next epoch
// under every retained generation (a sender moves to tx epoch + 1 whether
// or not it changes generation), and before the first move of a session
// also epoch 0 under a generation other than the current key's, for a
// peer that activated it before the session started.
func (c *Channel) deriveNexts() {
	c.nexts = [maxNexts]*rxKey{}
	if c.cur == nil || c.cur.epoch == ^uint32(0) {
		return
	}
	n := 0
	add := func(pk *pairKey, epoch uint32) {
		s := c.takeSlot()
		if err := c.fillRx(s, pk, epoch); err != nil {
			return // cannot happen with fixed-size inputs; the peer's move would fail as unknown
		}
		c.nexts[n] = s
		n++
	}
	for _, pk := range c.keys {
		if pk.prk == nil {
			continue
		}
		add(pk, c.cur.epoch+1)
		if pk.gen != c.cur.gen && !c.rotated {
			add(pk, c.cur.epoch)
		}
	}
}

// State is what a channel's keys look like now, for tests and status.
type State struct {
	Session          bool
	ActiveGeneration uint32 // the generation the sender moves to
	NewestGeneration uint32
	TxGeneration     uint32 // the sender's current key
	TxEpoch          uint32
	TxFrames         uint64 // frames sealed under it
	RxGeneration     uint32 // the receiver's current key
	RxEpoch          uint32
	RxPrevious       bool // the previous receive key is still open
	PeerHolds        bool // the peer's echo is the sender's epoch: it may move on
}

// State returns the channel's key state.
func (c *Channel) State() State {
	s := State{Session: c.session, ActiveGeneration: c.active.gen, NewestGeneration: c.newest.gen}
	if c.session {
		s.TxGeneration, s.TxEpoch, s.TxFrames = c.tx.gen, c.tx.epoch, c.tx.sent
		s.RxGeneration, s.RxEpoch, s.RxPrevious = c.cur.gen, c.cur.epoch, c.prev != nil
		s.PeerHolds = c.peerHolds
	}
	return s
}

// Counters returns the counts so far.
func (c *Channel) Counters() Counters { return c.ctr }
