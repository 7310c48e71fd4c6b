package main

import (
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/internal/app/bridged"
	"github.com/dxpu/dxpu/internal/app/cpuset"
	"github.com/dxpu/dxpu/internal/app/keylog"
)

// newBridgeCmd builds `dxpu bridge` (package internal/app/bridged runs it).
func newBridgeCmd(e *env) *cobra.Command {
	var fl bridged.Setup
	var o bridged.Options
	var keyLog, cpus string
	cmd := &cobra.Command{
		Use:   "bridge --role host|gpu [--pair N] (--listen UDPADDR --peer UDPADDR | --ether IFACE:MAC [--ether-driver afpacket|afxdp]) --pcie nettlp:LOCAL:REMOTE[:DMAREMOTE]|emu-gpu|memory",
		Short: "Run one dxpu bridge (host or GPU side of a pair) over UDP, with a NetTLP or emulated PCIe side",
		Long: `bridge runs one side of a host-GPU pair: the dxpu bridge state machine
(reliable delivery, credits, tags, ordering) exchanging frames with its peer
over UDP (--listen, --peer), and a PCIe side:

  --role host --pcie nettlp:LOCAL:REMOTE[:DMAREMOTE]
      a real host's NetTLP adapter at REMOTE: its TLPs arrive in NetTLP
      datagrams on LOCAL:0x3000..0x300f; completions and the GPU's DMA
      go back to it the same way. DMAREMOTE, if given, receives the
      requests (DMA) instead of REMOTE: a NetTLP target serving the host's
      memory next to a libtlp client doing its MMIO, on one machine.
  --role gpu --pcie emu-gpu
      an emulated GPU (--gpu-model) on the wall clock, BAR0 at 0x90000000,
      BAR1 (VRAM) at 0x2000000000, BAR3 at 0x4000000000, ID 03:00.0.
  --role gpu --pcie memory
      a memory-backed device of --mem-size bytes at --mem-base; with
      --doorbell ADDR, the test target of docs/protocol.md (12.1) at ADDR:
      commands written there make the device issue reads and writes
      toward the host (dxpu conform --doorbell judges them).

--gpu-model is read by --pcie emu-gpu only, --mem-base, --mem-size,
--doorbell and --mps by --pcie memory only: given to another side (--role
host, or the other --pcie), they are refused (exit 2).

Every frame of the pair is sealed (AES-256-GCM, or --seal-mode gmac for
integrity only) with the pair key of --key-file, the same on both sides
(32 random bytes or 64 hex digits; a regular file of this user's, mode
0600; a link to one is followed): forged, altered and replayed
frames are dropped and counted. Under the manager the key comes from the
allocation instead (dxpu bridge agent). --insecure-no-keys runs unkeyed, for
a lab only. Bridge counters are exported to Prometheus on --metrics (at
most 64 connections, 8 per client address, closed after 30s idle). Stop
with Ctrl-C.

--cpus LIST runs every thread of the daemon on those CPUs only (taskset's
list format: 3, 0-1, 0-1,8) with GOMAXPROCS their number: a core per pair
keeps a box's pairs from taking each other's cycles.

Sizes: frames carry at most --mtu bytes from the dxpu header on (1472, a
1500-byte Ethernet MTU; 8972 for jumbo frames), TLPs at most --max-payload
bytes of data (both sides the same), and a memory device answers a read
with completions of at most --mps bytes: fewer, larger frames and
completions cost less CPU per byte where the path carries them. Each side
announces its --max-payload at the handshake; a memory device facing a
peer that takes less than --mps completes with the largest Max Payload
Size the peer takes (as PCIe enumeration sets a device's MPS to what its
path carries) and logs a warning saying so.

Buffers: --window is the TLPs in flight per direction (the retransmit
window, and the reorder window offered to the peer; rounded up to a power
of two), --credits the header credits each flow-control class advertises
to the peer (its receive buffer in TLPs, with N x --max-payload / 16 data
credits); each 1..32768, 1024 by default. 1024 TLPs hold about 1024
256-byte writes in flight (256 KiB), which covers a software bridge's
round trip at 10 Gbit/s; a fabric whose bandwidth times round trip is
larger needs more, on both sides (100 Gbit/s and a 100 us round trip hold
1.25 MB, about 4900 such writes: --window 8192 --credits 8192). The
memory a bridge allocates grows with them: (3 x 256 + --window) transmit
slots and (--window + 3 x --credits) receive slots of 16 + --max-payload
+ 4 bytes each, about 3 MiB with the defaults and 21 MiB with 8192.

--key-log FILE appends the pair's traffic secrets to FILE (created 0600;
an existing FILE must be this user's own 0600 regular file, not a link),
one line per secret as derived, so that 'dxpu pcap unseal --key-log FILE'
opens a capture of the pair (like TLS's SSLKEYLOGFILE). Anyone who reads
FILE reads the frames it covers: for debugging only.

Example, a NetTLP host (libtlp on 127.0.0.1) and an emulated GPU:
  head -c 32 /dev/urandom > pair1.key && chmod 600 pair1.key
  dxpu bridge --role gpu  --pair 1 --listen 127.0.0.11:7001 --peer 127.0.0.10:7001 --pcie emu-gpu --key-file pair1.key &
  dxpu bridge --role host --pair 1 --listen 127.0.0.10:7001 --peer 127.0.0.11:7001 \
      --pcie nettlp:127.0.0.2:127.0.0.1 --key-file pair1.key --metrics 127.0.0.10:9101 &
  dxpu nettlp read --remote 127.0.0.2 --local 127.0.0.1 --addr 0x90000000 --size 4`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := numberFlags(cmd, []string{"keepalive", "dead-after", "mtu", "max-payload", "mps"}, "completion-timeout", "spin"); err != nil {
				return exitCodeError{2, err}
			}
			if err := bufferFlags(cmd); err != nil {
				return exitCodeError{2, err}
			}
			if err := timerOrder(cmd); err != nil {
				return exitCodeError{2, err}
			}
			if err := daemonKeyFlags(cmd, o.Insecure, o.KeyGeneration); err != nil {
				return exitCodeError{2, err}
			}
			if err := bridgeRoleFlags(cmd, fl.Role, fl.PCIe); err != nil {
				return exitCodeError{2, err}
			}
			o.Log = e.log
			fl.MPSGiven = cmd.Flags().Changed("mps")
			if err := fl.Apply(&o); err != nil {
				return exitFor(err, 2)
			}
			if cpus != "" {
				set, err := cpuset.Parse(cpus)
				if err != nil {
					return exitFor(fmt.Errorf("--cpus: %w", err), 2)
				}
				if err := cpuset.Pin(set); err != nil {
					return exitFor(fmt.Errorf("--cpus: %w", err), 2)
				}
			}
			var closeLog func()
			var err error
			if o.KeyLog, closeLog, err = openKeyLog(keyLog, e); err != nil {
				return exitFor(err, 2)
			}
			defer closeLog()
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return exitFor(bridged.Run(ctx, o), 1)
		},
	}
	f := cmd.Flags()
	f.StringVar(&fl.Role, "role", "", "host or gpu")
	f.Uint32Var(&o.Pair, "pair", 1, "pair ID (1..16777215), the same on both sides")
	f.StringVar(&fl.Listen, "listen", "", "UDP address for frames from the peer (IP:PORT)")
	f.StringVar(&fl.Peer, "peer", "", "the peer bridge's UDP address (IP:PORT)")
	f.StringVar(&fl.Ether, "ether", "", "raw Ethernet instead of UDP: IFACE:MAC, the peer's MAC on IFACE (EtherType 0x88b5, needs CAP_NET_RAW)")
	f.StringVar(&fl.EtherDriver, "ether-driver", "afpacket", "how --ether's frames move: afpacket, or afxdp (an AF_XDP socket and an XDP program on IFACE, zero-copy where the NIC offers it; root, MTU at most 3818)")
	f.StringVar(&fl.PCIe, "pcie", "", "PCIe side: nettlp:LOCAL:REMOTE[:DMAREMOTE] (host), emu-gpu or memory (gpu)")
	f.StringVar(&o.Metrics, "metrics", "", "serve Prometheus metrics on this TCP address (empty: off)")
	f.DurationVar(&o.Keepalive, "keepalive", 50*time.Millisecond, "longest silence while up (above 0, below --dead-after)")
	f.DurationVar(&o.DeadAfter, "dead-after", time.Second, "silence after which the link is down (above --keepalive)")
	f.DurationVar(&o.Spin, "spin", 0, "poll the socket (UDP, --ether, AF_XDP) this long after the last frames before sleeping, up to 1s (0: sleep at once): a busy pair then takes its frames without a wake-up, at the cost of a core polling; for a bridge with a core of its own (two bridges sharing one lose by it)")
	f.DurationVar(&o.CompletionTimeout, "completion-timeout", 0, "a forwarded request unanswered this long gets a CA completion (0, the default: 250ms on the host side, below libtlp's 500 ms; twice --dead-after on the GPU side, so that an outage the link hides stays hidden from the GPU's DMA reads)")
	f.StringVar(&fl.GPUModel, "gpu-model", "h100", "--pcie emu-gpu: emulated GPU model (h100, a100)")
	f.StringVar(&fl.KeyFile, "key-file", "", "the pair key, the same on both sides: 32 raw bytes or 64 hex digits, mode 0600")
	f.Uint32Var(&o.KeyGeneration, "key-generation", 1, "generation number of --key-file's key, from 1 (both sides the same)")
	f.StringVar(&fl.SealMode, "seal-mode", "gcm", "gcm (encryption and integrity) or gmac (integrity only); both sides the same")
	f.StringVar(&cpus, "cpus", "", "run the daemon's threads on these CPUs only (3, 0-1,8: taskset's list); GOMAXPROCS follows (empty: every CPU)")
	f.StringVar(&keyLog, "key-log", "", "append the pair's traffic secrets to this file (0600) for 'dxpu pcap unseal' (debugging: it opens the frames)")
	f.BoolVar(&o.Insecure, "insecure-no-keys", false, "run the pair unkeyed (lab only: anyone on the fabric can inject TLPs)")
	bytesVar(f, &o.MTU, "mtu", 1472, "largest frame from the dxpu header on, in bytes (at most the path's MTU less IP and UDP headers)")
	bytesVar(f, &o.MaxPayload, "max-payload", 512, "largest TLP payload in bytes (4..4096; both sides the same)")
	bytesVar(f, &o.MPS, "mps", 256, "--pcie memory: Max Payload Size, largest completion payload in bytes (128..4096, at most --max-payload)")
	f.IntVar(&o.Window, "window", bridge.DefaultWindow, "TLPs in flight per direction: the retransmit window and the reorder window offered to the peer (1..32768, rounded up to a power of two)")
	f.IntVar(&o.Credits, "credits", bridge.DefaultHeaderCredits, "header credits each flow-control class advertises to the peer: its receive buffer in TLPs (1..32768; data credits N x --max-payload / 16)")
	f.StringVar(&fl.MemBase, "mem-base", "0x2000000000", "--pcie memory: base address")
	f.StringVar(&fl.MemSize, "mem-size", "64M", "--pcie memory: size in bytes, above 0 (suffixes K, M, G; base plus size within 64 bits)")
	f.StringVar(&fl.Doorbell, "doorbell", "", "--pcie memory: test target of docs/protocol.md 12.1 at this address of the memory (for dxpu conform --doorbell)")
	cmd.AddCommand(newBridgeAgentCmd(e))
	return cmd
}

// Flags of `dxpu bridge` that only the GPU side, or one of its PCIe
// sides, reads: --role host took them and did nothing (--mps, which
// only a memory device reads, is Sizes.Check's to refuse).
var (
	bridgeEmuGPUFlags = []string{"gpu-model"}
	bridgeMemoryFlags = []string{"mem-base", "mem-size", "doorbell"}
)

// bridgeRoleFlags refuses a flag given on the command line that the role
// (and, for --role gpu, --pcie) does not read, naming the flag, its value
// and what it is for, as agentRoleFlags does for 'bridge agent'. A --role
// or --pcie that is none of the known ones is left to Setup.Apply and
// Run to refuse.
func bridgeRoleFlags(cmd *cobra.Command, role, pcie string) error {
	switch role {
	case "host":
		return unreadFlags(cmd, flagGroup{append(append([]string(nil), bridgeEmuGPUFlags...), bridgeMemoryFlags...), false, "--role gpu", "--role host"})
	case "gpu":
		if pcie != bridged.KindEmuGPU && pcie != bridged.KindMemory {
			return nil
		}
		return unreadFlags(cmd,
			flagGroup{bridgeEmuGPUFlags, pcie == bridged.KindEmuGPU, "--pcie " + bridged.KindEmuGPU, "--pcie " + pcie},
			flagGroup{bridgeMemoryFlags, pcie == bridged.KindMemory, "--pcie " + bridged.KindMemory, "--pcie " + pcie})
	}
	return nil
}

// openKeyLog opens --key-log (nothing when path is empty) and returns the
// hook that bridges log their secrets with and what closes the file.
func openKeyLog(path string, e *env) (func(seal.Secret), func(), error) {
	if path == "" {
		return nil, func() {}, nil
	}
	f, err := keylog.Open(path, e.log)
	if err != nil {
		return nil, nil, err
	}
	e.log.Warn("key log on: the secrets written there open this bridge's sealed frames", "file", path)
	return f.Log, func() { _ = f.Close() }, nil
}

// numberFlags refuses, up front and in one line naming the flag and its
// value, a bridge daemon's duration or int flag that is negative (a
// negative --keepalive reached the bridge and made it send without pause),
// and one of positive that is 0, which means nothing there; the flags of
// nonNegative take a default for 0, as their help says.
func numberFlags(cmd *cobra.Command, positive []string, nonNegative ...string) error {
	all := append(append([]string(nil), positive...), nonNegative...)
	if err := checkFlags(cmd, all, func(v float64) bool { return v >= 0 }, bridged.ErrNegative.Error()); err != nil {
		return err
	}
	return flagsPositive(cmd, positive...)
}

// bufferFlags refuses, up front and in one line naming the flag and its
// value, a --window or --credits outside 1..32768 TLPs (bridge.Config's
// limits; 0, which the daemons' Options take as the default, is no
// window or buffer as a flag), as bench link refuses its --window.
func bufferFlags(cmd *cobra.Command) error {
	for _, fl := range []struct {
		name, per string
		most      int
	}{{"window", "", bridge.MaxWindow}, {"credits", " per class", bridge.MaxHeaderCredits}} {
		n, err := cmd.Flags().GetInt(fl.name)
		if err != nil {
			return err
		}
		if n < 1 || n > fl.most {
			return fmt.Errorf("--%s %d: want 1..%d TLPs%s", fl.name, n, fl.most, fl.per)
		}
	}
	return nil
}

// timerOrder refuses a --dead-after not above --keepalive, naming each
// with the value typed or, where none was, the default that applied.
func timerOrder(cmd *cobra.Command) error {
	fs := cmd.Flags()
	ka, err := fs.GetDuration("keepalive")
	if err != nil {
		return err
	}
	da, err := fs.GetDuration("dead-after")
	if err != nil {
		return err
	}
	if da > ka {
		return nil
	}
	text := func(name string) string {
		f := fs.Lookup(name)
		if f.Changed {
			return flagText(f)
		}
		return flagText(f) + " (the default)"
	}
	return fmt.Errorf("--dead-after %s must exceed --keepalive %s", text("dead-after"), text("keepalive"))
}

// daemonKeyFlags refuses --key-generation 0 (generations start at 1, as
// the manager issues them) and key flags given to an unkeyed daemon, which
// would ignore them.
func daemonKeyFlags(cmd *cobra.Command, insecure bool, gen uint32) error {
	if gen == 0 {
		return fmt.Errorf("--key-generation 0: generations start at 1")
	}
	if !insecure {
		return nil
	}
	for _, name := range []string{"seal-mode", "key-generation", "key-log"} {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
			return fmt.Errorf("--%s %s: --insecure-no-keys runs the pair unkeyed, with nothing to seal", name, flagText(f))
		}
	}
	return nil
}
