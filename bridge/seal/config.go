package seal

import (
	"fmt"
	"io"
	"time"

	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp/encap"
)

// Defaults.
const (
	// DefaultRekeyAfter frames under one key start a new epoch: 2^22, half
	// of AES-GCM's confidentiality limit of 2^23 packets per key in RFC
	// 9001 section 6.6 (advantage 2^-57 for 64 KiB packets; dxpu bodies are
	// shorter). Rekeying costs one HKDF and one AES key schedule, so even
	// at 10 Mframe/s that is a new key every 0.4 s, well worth it.
	DefaultRekeyAfter = 1 << 22
	// DefaultPreviousGrace frames authenticated under a new receive key
	// retire the previous epoch's key: frames of the old epoch still in
	// flight (reordered behind the switch point) open until then.
	DefaultPreviousGrace = 4096
	// DefaultPreviousGraceTime after the first frame under a new receive
	// key retires the previous one if PreviousGrace frames have not done
	// so by then: a pair that carries only keepalives would otherwise take
	// PreviousGrace keepalive intervals to finish a rekey. A second is far
	// longer than frames stay reordered on a fabric.
	DefaultPreviousGraceTime = time.Second
	// maxRekeyAfter keeps the hard limit (2 * RekeyAfter) far below 2^64.
	maxRekeyAfter = 1 << 40
)

// Config is one side of one pair's sealing.
type Config struct {
	PairID uint32     // the pair's 24-bit ID, also bound into the keys
	Role   encap.Role // this side: encap.RoleHost or encap.RoleGPU
	Mode   Mode       // ModeGCM or ModeGMAC; both sides must agree

	// RekeyAfter frames sealed under one key make the sender move to the
	// next epoch as soon as the peer has shown it opens only the current
	// one (see Rekeying in the package doc). 0 means DefaultRekeyAfter. A
	// sender that cannot move (the peer sends nothing back) refuses to
	// seal past 2 * RekeyAfter frames (ErrKeyExhausted).
	RekeyAfter uint64
	// PreviousGrace frames authenticated under the current receive key
	// retire the previous one; at most RekeyAfter. 0 means
	// DefaultPreviousGrace (or RekeyAfter if smaller).
	PreviousGrace uint64
	// PreviousGraceTime after the first frame authenticated under the
	// current receive key retires the previous one too, whichever bound
	// comes first. Time is what the owner passes to Tick; a channel never
	// ticked retires by frame count alone. 0 means
	// DefaultPreviousGraceTime.
	PreviousGraceTime time.Duration

	// KeyLog, when set, is called with every traffic secret the channel
	// derives (the handshake secret of each generation, the session
	// secret of each generation and session), from the call that derived
	// it, so that an operator can open a capture of the pair offline
	// (Unsealer, `dxpu pcap unseal`). It is a debugging aid that defeats
	// the sealing of what it logs: off unless asked for.
	KeyLog func(Secret)

	// Rand is where New draws the channel's boot ID (BootIDLen bytes,
	// carried in every handshake frame and part of its nonce); nil means
	// crypto/rand. Tests pass a fixed reader to make handshake frames
	// reproducible; anything else must be a cryptographic random source.
	Rand io.Reader
}

func (c Config) withDefaults() (Config, error) {
	if c.PairID >= 1<<24 {
		return c, fmt.Errorf("%w: pair ID %#x does not fit 24 bits", ErrConfig, c.PairID)
	}
	if c.Role != encap.RoleHost && c.Role != encap.RoleGPU {
		return c, fmt.Errorf("%w: role %v is neither host nor gpu", ErrConfig, c.Role)
	}
	if c.Mode != ModeGCM && c.Mode != ModeGMAC {
		return c, fmt.Errorf("%w: mode %v is neither aes-256-gcm nor aes-256-gmac", ErrConfig, c.Mode)
	}
	if c.RekeyAfter == 0 {
		c.RekeyAfter = DefaultRekeyAfter
	}
	if c.RekeyAfter > maxRekeyAfter {
		return c, fmt.Errorf("%w: RekeyAfter %d above the %d maximum", ErrConfig, c.RekeyAfter, uint64(maxRekeyAfter))
	}
	if c.PreviousGrace == 0 {
		c.PreviousGrace = min(DefaultPreviousGrace, c.RekeyAfter)
	}
	if c.PreviousGraceTime < 0 {
		return c, fmt.Errorf("%w: PreviousGraceTime %s is negative", ErrConfig, sim.FormatDuration(c.PreviousGraceTime))
	}
	if c.PreviousGraceTime == 0 {
		c.PreviousGraceTime = DefaultPreviousGraceTime
	}
	if c.PreviousGrace > c.RekeyAfter {
		// The sender waits for the peer to retire its previous key before
		// moving on; past 2 * RekeyAfter it would have to stop.
		return c, fmt.Errorf("%w: PreviousGrace %d above RekeyAfter %d", ErrConfig, c.PreviousGrace, c.RekeyAfter)
	}
	return c, nil
}

func (c Config) peerRole() encap.Role {
	if c.Role == encap.RoleHost {
		return encap.RoleGPU
	}
	return encap.RoleHost
}
