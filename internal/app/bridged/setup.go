package bridged

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/bridge/nettlpside"
	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/bridge/udp"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/app/bytesize"
	"github.com/dxpu/dxpu/internal/app/units"
	"github.com/dxpu/dxpu/tlp/encap"
)

// Setup is what `dxpu bridge` gives as text and files; Apply turns it
// into Options.
type Setup struct {
	Role, Listen, Peer, PCIe string
	GPUModel                 string // h100 or a100
	MemBase, MemSize         string
	Doorbell                 string // test target address in the memory ("": none)
	KeyFile                  string
	Ether                    string // IFACE:MAC: raw Ethernet instead of --listen/--peer
	EtherDriver              string // afpacket (also ""), or afxdp
	SealMode                 string // gcm or gmac
	// MPSGiven says --mps was on the command line: it shapes a memory
	// side's completions and means nothing to the other kinds.
	MPSGiven bool
}

// Apply checks s and fills in o's role, addresses, PCIe side, key, seal
// mode, GPU model and memory window; its errors are apperr.ErrUsage and
// name the flag.
func (s Setup) Apply(o *Options) error {
	usage := apperr.Usage
	switch {
	case s.KeyFile != "" && o.Insecure:
		return usage(errors.New("--key-file and --insecure-no-keys exclude each other"))
	case s.KeyFile != "":
		k, err := LoadKeyFileFor("--key-file", s.KeyFile)
		if err != nil {
			return usage(err)
		}
		o.Key = k
	}
	mode, err := seal.ParseMode(s.SealMode)
	if err != nil {
		return usage(err)
	}
	o.SealMode = mode
	var ok bool
	if o.Role, ok = encap.ParseRole(s.Role); !ok {
		return usage(fmt.Errorf("--role %q: want host or gpu", s.Role))
	}
	if s.Ether != "" {
		ifname, mac, ok := strings.Cut(s.Ether, ":")
		if !ok || ifname == "" {
			return usage(fmt.Errorf("--ether %q: want IFACE:MAC (the peer's MAC)", s.Ether))
		}
		if s.Listen != "" || s.Peer != "" {
			return usage(errors.New("--ether and --listen/--peer exclude each other"))
		}
		if o.EtherPeer, err = net.ParseMAC(mac); err != nil || len(o.EtherPeer) != 6 {
			return usage(fmt.Errorf("--ether %q: want a 6-byte MAC after the interface", s.Ether))
		}
		o.EtherIface = ifname
	}
	switch s.EtherDriver {
	case "", EtherAFPacket:
		o.EtherDriver = EtherAFPacket
	case EtherAFXDP:
		if s.Ether == "" {
			return usage(errors.New("--ether-driver afxdp needs --ether IFACE:MAC"))
		}
		o.EtherDriver = EtherAFXDP
	default:
		return usage(fmt.Errorf("--ether-driver %q: want afpacket or afxdp", s.EtherDriver))
	}
	if s.Ether == "" {
		if s.Listen == "" || s.Peer == "" {
			return usage(errors.New("--listen and --peer are required (UDP IP:PORT of this bridge and of its peer), or --ether IFACE:MAC"))
		}
		if o.Listen, err = netip.ParseAddrPort(s.Listen); err != nil {
			return usage(fmt.Errorf("--listen %q: %w", s.Listen, err))
		}
		if o.Peer, err = netip.ParseAddrPort(s.Peer); err != nil {
			return usage(fmt.Errorf("--peer %q: %w", s.Peer, err))
		}
	}
	if o.PCIe, err = ParsePCIe(s.PCIe); err != nil {
		return usage(err)
	}
	if err := s.sizes(o); err != nil {
		return usage(err)
	}
	m, ok := gpu.ModelByName(s.GPUModel)
	if !ok {
		return usage(fmt.Errorf("--gpu-model %q: want h100 or a100", s.GPUModel))
	}
	o.GPUModel = m
	if o.MemBase, err = bytesize.Parse("mem-base", s.MemBase); err != nil {
		return usage(err)
	}
	if o.MemSize, err = bytesize.Parse("mem-size", s.MemSize); err != nil {
		return usage(err)
	}
	if err := CheckMemory(o.MemBase, o.MemSize, s.MemBase, s.MemSize); err != nil {
		return usage(err)
	}
	if s.Doorbell != "" {
		if o.PCIe.Kind != KindMemory {
			return usage(fmt.Errorf("--doorbell %s: the test target lives in a memory device (--pcie memory), not %q", s.Doorbell, o.PCIe.Kind))
		}
		db, err := bytesize.Parse("doorbell", s.Doorbell)
		if err != nil {
			return usage(err)
		}
		if db < o.MemBase || db-o.MemBase+nettlpside.DoorbellStatusOff+nettlpside.DoorbellStatusLen > o.MemSize || db%64 != 0 {
			return usage(fmt.Errorf("--doorbell %#x: want a 64-byte aligned address with %d bytes inside the memory (--mem-base %#x, --mem-size %d)",
				db, nettlpside.DoorbellStatusOff+nettlpside.DoorbellStatusLen, o.MemBase, o.MemSize))
		}
		o.Doorbell = &db
	}
	return nil
}

// CheckMemory refuses a memory device (--pcie memory) of 0 bytes, which
// nettlp.NewSparseMemory refuses when the device starts, naming no flag,
// and one whose window [base, base+size) wraps the 64-bit address space;
// baseText and sizeText are --mem-base and --mem-size as given.
func CheckMemory(base, size uint64, baseText, sizeText string) error {
	switch {
	case size == 0:
		return fmt.Errorf("--mem-size %s: want above 0 bytes", sizeText)
	case base+size < base:
		return fmt.Errorf("--mem-base %s and --mem-size %s: the memory wraps the 64-bit address space", baseText, sizeText)
	}
	return nil
}

// sizes checks --mtu, --max-payload and --mps against each other and the
// PCIe side (the bridge itself says when an MTU cannot carry one TLP).
func (s Setup) sizes(o *Options) error {
	z := Sizes{MTU: o.MTU, MaxPayload: o.MaxPayload, MPS: o.MPS, MPSGiven: s.MPSGiven,
		Memory: o.PCIe.Kind == KindMemory, Side: fmt.Sprintf("%q", o.PCIe.Kind)}
	if s.Ether == "" {
		// Over --ether: the interface's MTU, checked once it is open.
		z.MTULimit, z.MTUWhy = udp.MaxPayload, "a UDP datagram's payload"
	}
	return z.Check()
}

// Sizes are a bridge's frame and payload sizes as its flags give them
// (`dxpu bridge` and `dxpu bridge agent` alike).
type Sizes struct {
	MTU, MaxPayload, MPS int
	// MTULimit is the largest --mtu the transport carries, MTUWhy why;
	// 0: not checked here.
	MTULimit int
	MTUWhy   string
	// MPSGiven says --mps was on the command line; Memory that the PCIe
	// side is a memory device, the only side --mps shapes; Side names the
	// PCIe side for the message that refuses --mps elsewhere.
	MPSGiven, Memory bool
	Side             string
}

// Check reports the first size that makes no sense, naming its flag.
func (z Sizes) Check() error {
	maxPayload := bridge.Config{MaxPayload: z.MaxPayload}.Defaults().MaxPayload
	switch {
	case z.MTU < 0 || (z.MTULimit > 0 && z.MTU > z.MTULimit):
		return fmt.Errorf("--mtu %d: want at most %d (%s)", z.MTU, z.MTULimit, z.MTUWhy)
	case z.MaxPayload < 0 || z.MaxPayload > 4096 || z.MaxPayload%4 != 0:
		return fmt.Errorf("--max-payload %d: want a multiple of 4 in 4..4096", z.MaxPayload)
	case z.MPSGiven && !z.Memory:
		return fmt.Errorf("--mps shapes a memory device's completions (--pcie memory), not %s", z.Side)
	case z.MPS == 0 || !z.Memory:
		return nil // --mps's default, unused
	case !nettlp.ValidMPS(z.MPS):
		return fmt.Errorf("--mps %d: want %s", z.MPS, nettlp.MPSChoices)
	case z.MPS > maxPayload:
		return fmt.Errorf("--mps %d exceeds --max-payload %d: the bridge would refuse the device's completions", z.MPS, maxPayload)
	}
	return nil
}

// SetBuffers sets c's Window and Credits from a daemon's --window and
// --credits (`dxpu bridge` and `dxpu bridge agent` alike), 0 keeping
// bridge.Config's default for each: window TLPs in flight per direction
// (New rounds it up to a power of two), and credits headers for each
// class with credits*MaxPayload/16 data units, as the default's are
// (MaxPayload as c has it, or its default). A value bridge.Config
// refuses is its Validate's to name (field Window or Credits).
func SetBuffers(c *bridge.Config, window, credits int) {
	c.Window = window
	if credits == 0 {
		return
	}
	maxPayload := bridge.Config{MaxPayload: c.MaxPayload}.Defaults().MaxPayload
	for i := range c.Credits {
		c.Credits[i] = bridge.ClassCredits{Headers: credits, Data: credits * maxPayload / 16}
	}
}

// Timers are a bridge daemon's timers as its flags give them (`dxpu
// bridge` and `dxpu bridge agent` alike), with what 0 means for the two
// that must be ordered.
type Timers struct {
	Keepalive, DeadAfter, CompletionTimeout time.Duration
	DefaultKeepalive, DefaultDeadAfter      time.Duration
}

// Check reports the first timer that makes no sense, naming its flag and
// the value given (and the default, where 0 took it): bridge.Config's own
// message names its fields and shows its defaults, not what the user typed.
func (t Timers) Check() error {
	for _, f := range []struct {
		flag string
		d    time.Duration
	}{{"--keepalive", t.Keepalive}, {"--dead-after", t.DeadAfter}, {"--completion-timeout", t.CompletionTimeout}} {
		if f.d < 0 {
			return fmt.Errorf("%s %s: %w", f.flag, units.Duration(f.d), ErrNegative)
		}
	}
	ka, kaText := orDefault(t.Keepalive, t.DefaultKeepalive)
	da, daText := orDefault(t.DeadAfter, t.DefaultDeadAfter)
	if da <= ka {
		return fmt.Errorf("--dead-after %s must exceed --keepalive %s", daText, kaText)
	}
	return nil
}

// ErrNegative is wrapped by the errors of a flag given below zero.
var ErrNegative = errors.New("must not be negative")

// orDefault is d, or def for 0, with how to name it.
func orDefault(d, def time.Duration) (time.Duration, string) {
	if d == 0 {
		return def, units.Duration(def) + " (the default, for 0)"
	}
	return d, units.Duration(d)
}

// NameFlag puts the flag and value that set a bridge.Config field before
// the bridge's error about it: the bridge names its fields (MTU), the user
// typed flags (--mtu 10). flags maps a field to its flag and value; an
// error about another field is returned as it is.
func NameFlag(err error, flags map[string]string) error {
	var ce *bridge.ConfigError
	if errors.As(err, &ce) {
		if flag, ok := flags[ce.Field]; ok {
			return fmt.Errorf("%s: %w", flag, err)
		}
	}
	return err
}
