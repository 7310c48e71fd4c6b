package main

import (
	"fmt"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/seal"
)

// Key events (DXPU_EVENT_TX_KEY, DXPU_EVENT_RX_KEY): the library's own,
// after the bridge's kinds; it sees them as changes of the seal's state
// at the end of each call.
const (
	eventTxKey = bridge.EventKind(6)
	eventRxKey = bridge.EventKind(7)
)

// keyEvent is a key event waiting for dxpu_bridge_next_event.
type keyEvent struct {
	kind       bridge.EventKind
	at         time.Duration
	epoch, gen uint32
}

// keyWatch follows a keyed bridge's keys between calls.
type keyWatch struct {
	keyed          bool
	txGen, txEpoch uint32
	rxGen, rxEpoch uint32
	rxSeen         bool
	events         []keyEvent
}

// maxKeyEvents bounds the key events waiting: a caller that never polls
// events must not grow memory (the newest are kept).
const maxKeyEvents = 64

// noteKeys queues an event for each move of the sender's or the peer's
// key since the last call. It allocates nothing once events has grown.
func (h *handle) noteKeys() {
	if !h.keys.keyed || h.b == nil {
		return
	}
	s, _ := h.b.KeyState()
	add := func(k bridge.EventKind, epoch, gen uint32) {
		if len(h.keys.events) == maxKeyEvents {
			copy(h.keys.events, h.keys.events[1:])
			h.keys.events = h.keys.events[:maxKeyEvents-1]
		}
		at := max(h.now, 0)
		h.keys.events = append(h.keys.events, keyEvent{kind: k, at: at, epoch: epoch, gen: gen})
	}
	if s.TxGeneration != h.keys.txGen || s.TxEpoch != h.keys.txEpoch {
		// A new session's first key (epoch 0 of the same generation) is
		// no move.
		if s.TxEpoch != 0 || s.TxGeneration != h.keys.txGen {
			add(eventTxKey, s.TxEpoch, s.TxGeneration)
		}
		h.keys.txGen, h.keys.txEpoch = s.TxGeneration, s.TxEpoch
	}
	if s.Session && (!h.keys.rxSeen || s.RxGeneration != h.keys.rxGen || s.RxEpoch != h.keys.rxEpoch) {
		// A session's first receive key is no move; a later one is.
		if h.keys.rxSeen && (s.RxEpoch != 0 || s.RxGeneration != h.keys.rxGen) {
			add(eventRxKey, s.RxEpoch, s.RxGeneration)
		}
		h.keys.rxGen, h.keys.rxEpoch, h.keys.rxSeen = s.RxGeneration, s.RxEpoch, true
	}
}

// keysConfig fills cfg's key fields from the C keys, already converted.
func keysConfig(cfg *bridge.Config, key []byte, gen, mode uint32, rekeyAfter uint64) error {
	if len(key) != seal.KeyLen {
		return fmt.Errorf("%w: key: %d bytes, want DXPU_KEY_LEN (%d)", bridge.ErrConfig, len(key), seal.KeyLen)
	}
	if gen == 0 {
		return fmt.Errorf("%w: key generation 0: generations start at 1", bridge.ErrConfig)
	}
	if cfg.Seed != 0 {
		// A seed makes the nonces, ISNs and boot ID a sequence anyone
		// can replay: the protocol wants them from a cryptographic
		// random source (KEY-4, KEY-5).
		return fmt.Errorf("%w: seed %d in a keyed bridge: its nonces, sequence numbers and boot ID must come from a cryptographic random source (docs/protocol.md KEY-4); seed is for unkeyed simulations and tests, leave it 0", bridge.ErrConfig, cfg.Seed)
	}
	switch mode {
	case 0:
		mode = uint32(seal.ModeGCM)
	case uint32(seal.ModeGCM), uint32(seal.ModeGMAC):
	default:
		return fmt.Errorf("%w: seal_mode %d: want DXPU_SEAL_GCM or DXPU_SEAL_GMAC", bridge.ErrConfig, mode)
	}
	cfg.Key, cfg.KeyGeneration, cfg.SealMode, cfg.RekeyAfter = append([]byte(nil), key...), gen, seal.Mode(mode), rekeyAfter
	return nil
}

// opNewKeyed is opNew for a keyed config; wall is the wall clock at now 0
// (0: none).
func opNewKeyed(cfg bridge.Config, wall time.Time) (int64, int, error) {
	id, code, err := opNew(cfg)
	if err != nil || !cfg.Keyed() {
		return id, code, err
	}
	code = call(id, func(h *handle) int {
		h.keys.keyed = true
		if !wall.IsZero() {
			h.b.SetWallClock(wall)
		}
		h.keys.events = make([]keyEvent, 0, 8)
		s, _ := h.b.KeyState()
		h.keys.txGen, h.keys.txEpoch = s.TxGeneration, s.TxEpoch
		return codeOK
	})
	return id, code, nil
}

// opInstallKey installs pair key generation gen.
func opInstallKey(id int64, gen uint32, key []byte) int {
	return call(id, func(h *handle) int {
		if err := h.b.InstallKey(gen, key); err != nil {
			return h.fail(codeKey, err)
		}
		return codeOK
	})
}

// opActivateKey activates the newest installed generation.
func opActivateKey(id int64) int {
	return call(id, func(h *handle) int {
		if err := h.b.ActivateKey(); err != nil {
			return h.fail(codeKey, err)
		}
		return codeOK
	})
}

// opRekey moves the sender to a new epoch.
func opRekey(id int64) int {
	return call(id, func(h *handle) int {
		if err := h.b.Rekey(); err != nil {
			return h.fail(codeKey, err)
		}
		return codeOK
	})
}

// keyStatus is dxpu_key_state on Go values.
type keyStatus struct {
	keyed bool
	s     seal.State
	c     bridge.Counters
}

// opKeyState returns the seal's state and counters.
func opKeyState(id int64) (k keyStatus, code int) {
	code = call(id, func(h *handle) int {
		k.s, k.keyed = h.b.KeyState()
		k.c = h.b.Counters()
		return codeOK
	})
	return k, code
}
