package bridge

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
)

// Role is the side of the pair a bridge sits on; the same code runs on both.
type Role = encap.Role

// The two roles.
const (
	RoleHost = encap.RoleHost
	RoleGPU  = encap.RoleGPU
)

// ClassCredits sizes the receive buffer of one flow-control class: how many
// TLP headers and how many 16-byte data units it holds. A zero field is
// advertised as infinite (the local PCIe side promises to drain it).
type ClassCredits struct {
	Headers int
	Data    int
}

// IDMapping maps one routing ID between the local PCIe numbering and the
// numbering used on the wire (the host's view of the pair).
type IDMapping struct {
	Local tlp.ID
	Wire  tlp.ID
}

// Config parameterizes a Bridge. The zero value of every field but Role and
// PairID has a working default (see Defaults).
type Config struct {
	Role   Role
	PairID uint32 // 24 bits

	// MTU is the largest frame in bytes from the dxpu header on (the UDP
	// payload, or what follows the EtherType). Default 1472.
	MTU int
	// MaxPayload is the largest TLP payload in bytes (the MPS). Default 512.
	MaxPayload int
	// Window is the number of TLPs in flight (retransmit queue, and the reorder
	// window offered to the peer); rounded up to a power of two, at most
	// 32768 (a HELLO announces it in 16 bits). Default DefaultWindow.
	Window int
	// TxQueue is the depth of each class's queue of TLPs from the local PCIe
	// side waiting for credits, ordering or window, at most 32768. Default
	// DefaultTxQueue.
	TxQueue int
	// Credits are the receive buffers per class (index tlp.Posted,
	// tlp.NonPosted, tlp.Completion), advertised to the peer. Default
	// DefaultHeaderCredits headers and DefaultHeaderCredits*MaxPayload/16
	// data units each.
	Credits [NumClasses]ClassCredits
	// InfiniteQueue is the depth of a class whose header credits are
	// infinite, at most 32768. Default 64.
	InfiniteQueue int
	// TagBits is the tag space requests delivered to the local side may use
	// (8 or 10), announced to the peer, whose bridge assigns wire tags in it.
	// Default 8.
	TagBits int
	// MaxOutstanding caps the non-posted requests this bridge forwards at
	// once (default: the peer's whole tag space).
	MaxOutstanding int

	// CompletionTimeout: a forwarded request not completed in time gets a
	// CA completion from the bridge. Default 50 ms.
	CompletionTimeout time.Duration
	// AckDelay: the longest a received TLP waits for a piggybacked ack
	// before a standalone ACK goes out. Default 20 us.
	AckDelay time.Duration
	// InitialRTO, MinRTO, MaxRTO bound the retransmission timeout. Defaults
	// 1 ms, 100 us, 20 ms.
	InitialRTO, MinRTO, MaxRTO time.Duration
	// Keepalive: the longest the bridge stays silent while up. Default 1 ms.
	Keepalive time.Duration
	// DeadAfter: silence from the peer after which the link is declared
	// down. Default 10 ms.
	DeadAfter time.Duration
	// HelloInterval: how often HELLO is repeated while the link is not up.
	// Default 1 ms.
	HelloInterval time.Duration

	// IDMap translates routing IDs; unmapped IDs pass unchanged.
	IDMap []IDMapping
	// DownstreamBus, when ConvertType1 is set, is the secondary bus of the
	// virtual downstream port: type 1 config requests from the local side
	// targeting it become type 0.
	ConvertType1  bool
	DownstreamBus uint8
	// PeerID is the completer ID of completions the bridge synthesizes (the
	// local view of the device on the far side).
	PeerID tlp.ID

	// AutoRelease returns a TLP's credits as soon as NextTLP hands it out,
	// for local sides that consume instantly.
	AutoRelease bool
	// Seed, when not 0, makes session nonces, key nonces and initial
	// sequence numbers a reproducible sequence, for simulations in virtual
	// time. 0 (what daemons use) draws each from crypto/rand, so no two
	// starts of a bridge share them.
	Seed uint64

	// Key is the pair key (seal.KeyLen = 32 bytes, random, issued by the
	// manager to both bridges of the pair): every frame is then sealed
	// (see Keys in the package doc). nil runs the pair unkeyed, as the
	// emulated demo does. New copies the key; Config() does not return it.
	Key []byte
	// KeyGeneration numbers Key; keys installed later (InstallKey) must
	// have higher generations.
	KeyGeneration uint32
	// SealMode is seal.ModeGCM (encryption and integrity, the default) or
	// seal.ModeGMAC (integrity only); both sides must agree.
	SealMode seal.Mode
	// RequireKeys refuses an unkeyed pair: New fails without a Key. (A
	// keyed bridge drops every unsealed frame in any case.)
	RequireKeys bool
	// RekeyAfter frames sealed under one key move the sender to a new
	// epoch; 0 means seal.DefaultRekeyAfter (2^22).
	RekeyAfter uint64
	// RekeyGrace frames authenticated under the peer's new epoch retire its
	// previous one (frames of the old epoch reordered behind the switch
	// open until then); the peer moves again, on RekeyAfter or Rekey, only
	// after that. 0 means seal.DefaultPreviousGrace (4096) or RekeyAfter if
	// smaller; at most RekeyAfter.
	RekeyGrace uint64
	// RekeyGraceTime after the peer's first frame under its new epoch
	// retires the previous one too, whichever of the two bounds comes
	// first, so that a pair carrying only keepalives finishes a rekey or a
	// key change within it (time as the bridge's now). 0 means
	// seal.DefaultPreviousGraceTime (1 s).
	RekeyGraceTime time.Duration
	// KeyLog, when set on a keyed bridge, receives every traffic secret
	// the seal derives (seal.Config.KeyLog): what `dxpu pcap unseal`
	// opens a capture of the pair with. Off by default; it defeats the
	// sealing of the frames it covers.
	KeyLog func(seal.Secret)
}

// Keyed reports whether c configures a keyed pair.
func (c *Config) Keyed() bool { return len(c.Key) > 0 }

// frameBudget is the largest plain frame the frame builder may write: the
// MTU less what sealing adds.
func (c *Config) frameBudget() int {
	if c.Keyed() {
		return c.MTU - seal.Overhead
	}
	return c.MTU
}

// Defaults returns c with every zero field set to its default.
func (c Config) Defaults() Config {
	def := func(p *time.Duration, d time.Duration) {
		if *p == 0 {
			*p = d
		}
	}
	defi := func(p *int, d int) {
		if *p == 0 {
			*p = d
		}
	}
	defi(&c.MTU, 1472)
	defi(&c.MaxPayload, 512)
	defi(&c.Window, DefaultWindow)
	defi(&c.TxQueue, DefaultTxQueue)
	defi(&c.InfiniteQueue, 64)
	defi(&c.TagBits, 8)
	var zero ClassCredits
	for i := range c.Credits {
		if c.Credits[i] == zero {
			c.Credits[i] = ClassCredits{Headers: DefaultHeaderCredits, Data: DefaultHeaderCredits * c.MaxPayload / 16}
		}
	}
	def(&c.CompletionTimeout, 50*time.Millisecond)
	def(&c.AckDelay, 20*time.Microsecond)
	def(&c.InitialRTO, time.Millisecond)
	def(&c.MinRTO, 100*time.Microsecond)
	def(&c.MaxRTO, 20*time.Millisecond)
	def(&c.Keepalive, time.Millisecond)
	def(&c.DeadAfter, 10*time.Millisecond)
	def(&c.HelloInterval, time.Millisecond)
	if c.Keyed() && c.SealMode == 0 {
		c.SealMode = seal.ModeGCM
	}
	// Round up a window Validate accepts only: a negative one stays for
	// Validate to refuse rather than becoming a window of 1, and so does
	// one above MaxWindow (doubling up to one above 1<<62 overflowed to 0
	// and never ended).
	if c.Window > 0 && c.Window <= MaxWindow {
		c.Window = 1 << bits.Len(uint(c.Window-1))
	}
	return c
}

// The data path's defaults hold what a datacenter link has in flight: at
// 10 Gbit/s and a software bridge's 100-300 us round trip, 125-375 KB, or
// a thousand 256-byte writes. They are what 'dxpu bridge', 'dxpu bridge
// agent', the C library and the benchmarks run. Measured with 'dxpu bench
// link' (2 cores, loopback): the earlier 256/64/64 stalled on credits at
// about 0.35-0.75x the goodput of these, and 512 header credits held
// 512-byte writes at 0.75-0.9x of 1024 with jumbo frames. Raise them
// ('dxpu bridge --window --credits') where bandwidth times round trip is
// larger.
const (
	DefaultWindow        = 1024
	DefaultTxQueue       = 256
	DefaultHeaderCredits = 1024
)

// The largest TLP counts Validate accepts: what the protocol can use. A
// HELLO announces the window in 16 bits and a window is a power of two,
// so at most 1<<15 TLPs are in flight, and at most 1<<15 header credits
// of a class (a 16-bit field too) are offered. A class queue of TLPs from
// the local side, or the receive queue of a class with infinite header
// credits, deeper than that holds what the wire cannot take at once.
// New allocates a buffer of maxTLP bytes for each (see poolSlots), so
// these bound its memory: at most 8<<15 buffers, 1.08 GB at MaxPayload
// 4096 (queues of 1<<16 took it to 1.9 GB).
// MaxWindow and MaxHeaderCredits are exported for the flags that set
// them (dxpu bridge, bridge agent, bench link).
const (
	MaxWindow        = 1 << 15
	maxQueue         = 1 << 15
	MaxHeaderCredits = 1 << 15
)

// poolSlots is how many TLP buffers of maxTLP bytes New allocates: to
// send, each class's queue from the local side and the window in flight;
// to receive, the reorder window and each class's receive buffer (its
// header credits, or InfiniteQueue where they are infinite).
func (c *Config) poolSlots() (tx, rx int) {
	tx = NumClasses*c.TxQueue + c.Window
	rx = c.Window
	for _, cc := range c.Credits {
		if cc.Headers == 0 {
			rx += c.InfiniteQueue
		} else {
			rx += cc.Headers
		}
	}
	return tx, rx
}

// maxTLP is the largest TLP accepted: 4-DW header, payload, digest.
func (c *Config) maxTLP() int { return tlp.Header4DW + c.MaxPayload + 4 }

// ConfigError is what Validate returns: Field names the Config field, so
// that a daemon can name the flag that set it. It wraps ErrConfig.
type ConfigError struct {
	Field   string
	Problem string
}

func (e *ConfigError) Error() string { return fmt.Sprintf("%v: %s: %s", ErrConfig, e.Field, e.Problem) }
func (e *ConfigError) Unwrap() error { return ErrConfig }

// Validate reports the first field that makes no sense, after defaults.
func (c *Config) Validate() error {
	bad := func(field string, format string, args ...any) error {
		for i, a := range args {
			if d, ok := a.(time.Duration); ok {
				args[i] = sim.FormatDuration(d) // us, not µs
			}
		}
		return &ConfigError{Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	// Defaults fills zeros only: a negative timer reaches here as given,
	// and a negative Keepalive would make the bridge send without pause.
	for _, t := range []struct {
		field string
		d     time.Duration
	}{
		{"CompletionTimeout", c.CompletionTimeout}, {"AckDelay", c.AckDelay},
		{"InitialRTO", c.InitialRTO}, {"MinRTO", c.MinRTO}, {"MaxRTO", c.MaxRTO},
		{"Keepalive", c.Keepalive}, {"DeadAfter", c.DeadAfter}, {"HelloInterval", c.HelloInterval},
		{"RekeyGraceTime", c.RekeyGraceTime},
	} {
		if t.d < 0 {
			return bad(t.field, "%v is negative", t.d)
		}
	}
	switch {
	case c.Role != RoleHost && c.Role != RoleGPU:
		return bad("Role", "%d is neither RoleHost nor RoleGPU", c.Role)
	case c.PairID >= 1<<24:
		return bad("PairID", "%#x does not fit 24 bits", c.PairID)
	case c.MaxPayload < 4 || c.MaxPayload > 4096 || c.MaxPayload%4 != 0:
		return bad("MaxPayload", "%d: want a multiple of 4 in 4..4096", c.MaxPayload)
	case c.RequireKeys && !c.Keyed():
		return bad("Key", "none, and RequireKeys refuses an unkeyed pair")
	case c.Keyed() && len(c.Key) != seal.KeyLen:
		return bad("Key", "%d bytes, want %d", len(c.Key), seal.KeyLen)
	case c.Keyed() && c.SealMode != seal.ModeGCM && c.SealMode != seal.ModeGMAC:
		return bad("SealMode", "%v is neither %v nor %v", c.SealMode, seal.ModeGCM, seal.ModeGMAC)
	case c.MTU > 65535 || c.frameBudget() < encap.HeaderLen+2+c.maxTLP():
		need := encap.HeaderLen + 2 + c.maxTLP() + (c.MTU - c.frameBudget())
		return bad("MTU", "%d cannot carry one %d-byte TLP (need %d..65535)", c.MTU, c.maxTLP(), need)
	case c.Window < 1 || c.Window > MaxWindow:
		return bad("Window", "%d: want 1..%d (the largest window a HELLO announces)", c.Window, MaxWindow)
	case c.TxQueue < 1 || c.TxQueue > maxQueue:
		return bad("TxQueue", "%d: want 1..%d (no more TLPs than the largest window)", c.TxQueue, maxQueue)
	case c.InfiniteQueue < 1 || c.InfiniteQueue > maxQueue:
		return bad("InfiniteQueue", "%d: want 1..%d (no more TLPs than the largest window)", c.InfiniteQueue, maxQueue)
	case c.TagBits != 8 && c.TagBits != 10:
		return bad("TagBits", "%d: want 8 or 10", c.TagBits)
	case c.MaxOutstanding < 0:
		return bad("MaxOutstanding", "%d is negative", c.MaxOutstanding)
	case c.MinRTO <= 0 || c.MaxRTO < c.MinRTO || c.InitialRTO < c.MinRTO:
		return bad("RTO", "want 0 < MinRTO <= InitialRTO and MinRTO <= MaxRTO")
	case c.Keepalive <= 0:
		return bad("Keepalive", "%v: want above 0", c.Keepalive)
	case c.DeadAfter <= c.Keepalive:
		return bad("DeadAfter", "%v must exceed Keepalive %v", c.DeadAfter, c.Keepalive)
	case c.CompletionTimeout <= 0:
		return bad("CompletionTimeout", "%v: want above 0", c.CompletionTimeout)
	case c.HelloInterval <= 0:
		return bad("HelloInterval", "%v: want above 0", c.HelloInterval)
	}
	for i, cc := range c.Credits {
		if cc.Headers < 0 || cc.Headers > MaxHeaderCredits || cc.Data < 0 || cc.Data > 1<<30 {
			return bad("Credits", "class %v: %+v out of range (headers 0..%d, data 0..2^30)", tlp.Class(i), cc, MaxHeaderCredits)
		}
		if cc.Data != 0 && cc.Data < (c.MaxPayload+15)/16 {
			return bad("Credits", "class %v: %d data units cannot hold one %d-byte payload", tlp.Class(i), cc.Data, c.MaxPayload)
		}
	}
	seen := map[tlp.ID]bool{}
	seenW := map[tlp.ID]bool{}
	for i, m := range c.IDMap {
		if seen[m.Local] || seenW[m.Wire] {
			return bad("IDMap", "entry %d maps %v<->%v twice", i, m.Local, m.Wire)
		}
		seen[m.Local], seenW[m.Wire] = true, true
	}
	return nil
}
