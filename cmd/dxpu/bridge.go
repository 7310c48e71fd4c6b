package main

import (
	"fmt"
	"net/netip"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/internal/app/bridged"
)

// newBridgeCmd builds `dxpu bridge` (package internal/app/bridged runs it).
func newBridgeCmd(e *env) *cobra.Command {
	var fl struct {
		role, listen, peer, pcie, metrics string
		pair                              uint32
		keepalive, deadAfter, cplTimeout  time.Duration
		gpuModel, memBase, memSize        string
		keyFile, sealMode                 string
		keyGen                            uint32
		insecure                          bool
	}
	cmd := &cobra.Command{
		Use:   "bridge --role host|gpu --pair N --listen UDPADDR --peer UDPADDR --pcie nettlp:LOCAL:REMOTE[:DMAREMOTE]|emu-gpu|memory",
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
      a memory-backed device of --mem-size bytes at --mem-base.

Every frame of the pair is sealed (AES-256-GCM, or --seal-mode gmac for
integrity only) with the pair key of --key-file, the same on both sides
(32 random bytes or 64 hex digits, mode 0600): forged, altered and replayed
frames are dropped and counted. Under the manager the key comes from the
allocation instead (dxpu bridge agent). --insecure-no-keys runs unkeyed, for
a lab only. Bridge counters are exported to Prometheus on --metrics. Stop
with Ctrl-C.

Example, a NetTLP host (libtlp on 127.0.0.1) and an emulated GPU:
  head -c 32 /dev/urandom > pair1.key && chmod 600 pair1.key
  dxpu bridge --role gpu  --pair 1 --listen 127.0.0.11:7001 --peer 127.0.0.10:7001 --pcie emu-gpu --key-file pair1.key &
  dxpu bridge --role host --pair 1 --listen 127.0.0.10:7001 --peer 127.0.0.11:7001 \
      --pcie nettlp:127.0.0.2:127.0.0.1 --key-file pair1.key --metrics 127.0.0.10:9101 &
  dxpu nettlp read --remote 127.0.0.2 --local 127.0.0.1 --addr 0x90000000 --size 4`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o := bridged.Options{Pair: fl.pair, Metrics: fl.metrics, Keepalive: fl.keepalive, DeadAfter: fl.deadAfter,
				CompletionTimeout: fl.cplTimeout, Log: e.log, KeyGeneration: fl.keyGen, Insecure: fl.insecure}
			switch {
			case fl.keyFile != "" && fl.insecure:
				return exitCodeError{2, fmt.Errorf("--key-file and --insecure-no-keys exclude each other")}
			case fl.keyFile != "":
				k, err := bridged.LoadKeyFile(fl.keyFile)
				if err != nil {
					return exitCodeError{2, err}
				}
				o.Key = k
			}
			switch fl.sealMode {
			case "gcm":
				o.SealMode = seal.ModeGCM
			case "gmac":
				o.SealMode = seal.ModeGMAC
			default:
				return exitCodeError{2, fmt.Errorf("--seal-mode %q: want gcm or gmac", fl.sealMode)}
			}
			switch fl.role {
			case "host":
				o.Role = bridge.RoleHost
			case "gpu":
				o.Role = bridge.RoleGPU
			default:
				return exitCodeError{2, fmt.Errorf("--role %q: want host or gpu", fl.role)}
			}
			var err error
			if o.Listen, err = netip.ParseAddrPort(fl.listen); err != nil {
				return exitCodeError{2, fmt.Errorf("--listen %q: %w", fl.listen, err)}
			}
			if o.Peer, err = netip.ParseAddrPort(fl.peer); err != nil {
				return exitCodeError{2, fmt.Errorf("--peer %q: %w", fl.peer, err)}
			}
			if o.PCIe, err = bridged.ParsePCIe(fl.pcie); err != nil {
				return exitCodeError{2, err}
			}
			m, ok := gpu.ModelByName(fl.gpuModel)
			if !ok {
				return exitCodeError{2, fmt.Errorf("--gpu-model %q: want h100 or a100", fl.gpuModel)}
			}
			o.GPUModel = m
			if o.MemBase, err = parseSize("mem-base", fl.memBase); err != nil {
				return exitCodeError{2, err}
			}
			if o.MemSize, err = parseSize("mem-size", fl.memSize); err != nil {
				return exitCodeError{2, err}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return exitFor(bridged.Run(ctx, o), 1)
		},
	}
	f := cmd.Flags()
	f.StringVar(&fl.role, "role", "", "host or gpu")
	f.Uint32Var(&fl.pair, "pair", 1, "pair ID (24 bits), the same on both sides")
	f.StringVar(&fl.listen, "listen", "", "UDP address for frames from the peer (IP:PORT)")
	f.StringVar(&fl.peer, "peer", "", "the peer bridge's UDP address (IP:PORT)")
	f.StringVar(&fl.pcie, "pcie", "", "PCIe side: nettlp:LOCAL:REMOTE[:DMAREMOTE] (host), emu-gpu or memory (gpu)")
	f.StringVar(&fl.metrics, "metrics", "", "serve Prometheus metrics on this TCP address (empty: off)")
	f.DurationVar(&fl.keepalive, "keepalive", 50*time.Millisecond, "longest silence while up")
	f.DurationVar(&fl.deadAfter, "dead-after", time.Second, "silence after which the link is down")
	f.DurationVar(&fl.cplTimeout, "completion-timeout", 250*time.Millisecond, "a forwarded request unanswered this long gets a CA completion (below libtlp's 500 ms)")
	f.StringVar(&fl.gpuModel, "gpu-model", "h100", "emulated GPU model (h100, a100)")
	f.StringVar(&fl.keyFile, "key-file", "", "the pair key, the same on both sides: 32 raw bytes or 64 hex digits, mode 0600")
	f.Uint32Var(&fl.keyGen, "key-generation", 1, "generation number of --key-file's key (both sides the same)")
	f.StringVar(&fl.sealMode, "seal-mode", "gcm", "gcm (encryption and integrity) or gmac (integrity only); both sides the same")
	f.BoolVar(&fl.insecure, "insecure-no-keys", false, "run the pair unkeyed (lab only: anyone on the fabric can inject TLPs)")
	f.StringVar(&fl.memBase, "mem-base", "0x2000000000", "memory device base address")
	f.StringVar(&fl.memSize, "mem-size", "64M", "memory device size (suffixes K, M, G)")
	cmd.AddCommand(newBridgeAgentCmd(e))
	return cmd
}
