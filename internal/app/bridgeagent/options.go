package bridgeagent

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/app/bridged"
	"github.com/dxpu/dxpu/internal/app/httpguard"
	"github.com/dxpu/dxpu/internal/app/units"
	"github.com/dxpu/dxpu/internal/app/vm"
)

// PCIe sides of a GPU box's agent.
const (
	PCIeEmuGPU = "emu-gpu" // an emulated GPU per pair, of the pair's model
	PCIeMemory = "memory"  // a memory-backed device per pair (no config space)
)

// Options configure an agent.
type Options struct {
	Role bridge.Role

	// AgentListen is the TCP address of the agent API. CertFile and
	// KeyFile serve it over https; Insecure allows plain http (a lab).
	AgentListen       string
	CertFile, KeyFile string
	Insecure          bool
	// APIServer bounds the agent API's server: timeouts, header bytes,
	// connections in all and per address (zero fields: APIDefaults).
	APIServer httpguard.Config
	// Credential is the agent credential the manager issued at
	// registration; the agent accepts calls carrying it and nothing else,
	// and reports to the manager with it.
	Credential string

	// Listen is the UDP address of the data plane: the bridge endpoint
	// (ip, udp_port) registered for this box or host. Every pair's frames
	// arrive on it.
	Listen netip.AddrPort
	// Switch is where frames go (the UDP switch's address); unset, each
	// pair's frames go to the other end's registered ip:udp_port, through
	// whatever switch routes between them.
	Switch netip.AddrPort

	// Host role: Ports hot-plug ports, as registered with the manager
	// (MinPorts..MaxPorts, default 32; the emulated host takes GPUs on the
	// first 32 of them, a q35 guest on the first maxGuestSlots), HostID
	// the host this agent serves ("": any).
	Ports  int
	HostID string
	// VM, when set, makes the host a QEMU guest booted by the agent
	// (package internal/app/vm; its GPUs and guest arguments are the
	// agent's): each pair's hot-add is a device_add of a proxy device into
	// the running guest, each removal a device_del. Nil: the emulated host.
	VM *vm.Options

	// GPU role: PCIe is PCIeEmuGPU (default) or PCIeMemory; Box, when
	// set, is the box as registered (its JSON): pairs for other boxes or
	// GPUs it does not list are refused. MemBase and MemSize size a
	// memory device.
	PCIe             string
	Box              *pool.Box
	MemBase, MemSize uint64

	// Bridge timers (defaults 50ms, 1s, and for CompletionTimeout twice
	// DeadAfter: see DefaultCompletionTimeout).
	Keepalive, DeadAfter, CompletionTimeout time.Duration

	// Sizes of every pair's bridge: MTU its largest frame from the dxpu
	// header on, MaxPayload its largest TLP payload (bridge.Config's
	// defaults, 1472 and 512), MPS a memory device's Max Payload Size
	// (default 256; it follows a peer that takes less).
	MTU, MaxPayload, MPS int
	// Window and Credits size every pair's bridge's buffers in TLPs: in
	// flight per direction, and header credits per class (0: bridge's
	// DefaultWindow and DefaultHeaderCredits; bridged.SetBuffers).
	Window, Credits int

	// Spin: each pair's runner polls the data-plane socket's queue this
	// long after its last frames before it sleeps (driver.Runner.Spin;
	// `--spin`, 0: at once), as `dxpu bridge --spin` does.
	Spin time.Duration

	// Manager is the manager's URL, for the pairs' link-down and link-up
	// reports (both roles; report.go); ManagerCAFile the CA that signs it
	// when https ("": system roots).
	Manager, ManagerCAFile string

	// Metrics, when set, is the TCP address of /metrics (Prometheus):
	// every pair's bridge counters, as `dxpu bridge --metrics` serves
	// them, and the agent's (metrics.go). MetricsServer bounds its server
	// (zero fields: httpguard.MetricsDefaults).
	Metrics       string
	MetricsServer httpguard.Config

	// KeyLog, when set, receives the traffic secrets of every pair's
	// bridge (bridge.Config.KeyLog; `--key-log`).
	KeyLog func(seal.Secret)

	Log *slog.Logger
}

// DefaultCompletionTimeout is a pair's completion timeout when none is
// given: twice deadAfter, both roles, so that an outage shorter than
// deadAfter, which the link hides (LNK-3), stays hidden from the requests
// outstanding across it: the GPU's DMA reads and the host's MMIO reads.
// (`dxpu bridge`'s host side takes 250 ms for a NetTLP host's 500 ms; an
// agent's host is its own emulated host or guest, which waits longer than
// the bridge: newEmuHost, newVMHost.)
func DefaultCompletionTimeout(deadAfter time.Duration) time.Duration {
	return 2 * deadAfter
}

// Agent defaults: the timers every pair's bridge runs with when not given.
const (
	DefaultKeepalive = 50 * time.Millisecond
	DefaultDeadAfter = time.Second
)

// Host ports as the manager registers a host (pool.Host.Validate): at
// least pool.MinHostPorts, at most 65536.
const (
	MinPorts = pool.MinHostPorts
	MaxPorts = 1 << 16
)

// maxSwitchSlots is the most ports that hold a GPU on the emulated host
// (and a pc guest): its virtual switch's downstream ports are the device
// numbers of one bus, 0..31.
const maxSwitchSlots = 32

// CheckPorts refuses a host's port count the manager would not register:
// an agent with fewer ports than registered refuses the pairs the manager
// puts on the others.
func CheckPorts(n int) error {
	if n < MinPorts || n > MaxPorts {
		return apperr.Usage(fmt.Errorf("--ports %d: want %d..%d, the host's ports as registered with the manager", n, MinPorts, MaxPorts))
	}
	return nil
}

func (o *Options) fill() error {
	// Checked as given, before 0 takes a default: a negative timer was
	// silently replaced, and the message names the values the user gave.
	if err := (bridged.Timers{Keepalive: o.Keepalive, DeadAfter: o.DeadAfter, CompletionTimeout: o.CompletionTimeout,
		DefaultKeepalive: DefaultKeepalive, DefaultDeadAfter: DefaultDeadAfter}).Check(); err != nil {
		return apperr.Usage(err)
	}
	if o.Spin < 0 || o.Spin > driver.MaxSpin {
		return apperr.Usage(units.Errorf("--spin %v: want 0 up to %v", o.Spin, driver.MaxSpin))
	}
	if o.Keepalive == 0 {
		o.Keepalive = DefaultKeepalive
	}
	if o.DeadAfter == 0 {
		o.DeadAfter = DefaultDeadAfter
	}
	if o.CompletionTimeout == 0 {
		o.CompletionTimeout = DefaultCompletionTimeout(o.DeadAfter)
	}
	if o.Ports == 0 {
		o.Ports = MinPorts
	}
	if o.PCIe == "" {
		o.PCIe = PCIeEmuGPU
	}
	if o.MemSize == 0 {
		o.MemSize = 64 << 20
	}
	if o.MemBase == 0 {
		o.MemBase = 0x20_0000_0000
	}
	if err := CheckPorts(o.Ports); err != nil {
		return err
	}
	switch {
	case o.Role != bridge.RoleHost && o.Role != bridge.RoleGPU:
		return apperr.Usage(fmt.Errorf("role %v: want host or gpu", o.Role))
	case !o.Listen.IsValid():
		return apperr.Usage(fmt.Errorf("--listen: the data plane needs a UDP address (the bridge's registered ip:udp_port)"))
	case o.VM != nil && o.Role != bridge.RoleHost:
		return apperr.Usage(fmt.Errorf("--vm is for --role host: the guest is the host that borrows GPUs"))
	case o.PCIe != PCIeEmuGPU && o.PCIe != PCIeMemory:
		return apperr.Usage(fmt.Errorf("--pcie %q: want %s or %s", o.PCIe, PCIeEmuGPU, PCIeMemory))
	}
	// Every pair's bridge is built from the flags: refuse now what each
	// would refuse at its programming (an --mtu too small for one TLP),
	// naming the flag.
	tmpl := o.bridgeConfig(1, make([]byte, seal.KeyLen), 1).Defaults()
	if err := tmpl.Validate(); err != nil {
		return apperr.Usage(bridged.NameFlag(err, map[string]string{"MTU": fmt.Sprintf("--mtu %d", o.MTU),
			"MaxPayload": fmt.Sprintf("--max-payload %d", o.MaxPayload), "Window": fmt.Sprintf("--window %d", o.Window),
			"Credits": fmt.Sprintf("--credits %d", o.Credits)}))
	}
	if o.Box != nil {
		for _, g := range o.Box.GPUs {
			if o.PCIe == PCIeEmuGPU {
				if _, err := modelOf(g.Model); err != nil {
					return apperr.Usage(fmt.Errorf("box %s gpu %s: %w", o.Box.ID, g.ID, err))
				}
			}
		}
	}
	return nil
}

// bridgeConfig is the configuration of a pair's bridge.
func (o *Options) bridgeConfig(pair uint32, key []byte, gen uint32) bridge.Config {
	c := bridge.Config{Role: o.Role, PairID: pair, MTU: o.MTU, MaxPayload: o.MaxPayload, Keepalive: o.Keepalive, DeadAfter: o.DeadAfter,
		CompletionTimeout: o.CompletionTimeout, MaxRTO: max(o.DeadAfter/5, 20*time.Millisecond),
		Key: key, KeyGeneration: gen, RequireKeys: true, KeyLog: o.KeyLog}
	bridged.SetBuffers(&c, o.Window, o.Credits)
	return c
}

// slots is the number of host ports that can hold a GPU: the first
// maxSwitchSlots (a bus's devices), and in a q35 guest only the first
// maxGuestSlots (each is a PCIe root port reserving 64 MiB of the guest's
// 32-bit MMIO window). Pairs on the other registered ports are refused.
func (o *Options) slots() int {
	if o.VM != nil && (o.VM.Machine == "" || o.VM.Machine == "q35") {
		return min(o.Ports, maxGuestSlots)
	}
	return min(o.Ports, maxSwitchSlots)
}

// modelOf maps a pool GPU model to the emulated one.
func modelOf(name string) (gpu.Model, error) {
	if m, ok := gpu.ModelByName(name); ok {
		return m, nil
	}
	if m, ok := gpu.ModelByName(strings.ToLower(name)); ok {
		return m, nil
	}
	return gpu.Model{}, fmt.Errorf("model %q cannot be emulated (H100 or A100)", name)
}
