package main

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/internal/app/bridgeagent"
)

// newBridgeAgentCmd builds `dxpu bridge agent` (package
// internal/app/bridgeagent runs it).
func newBridgeAgentCmd(e *env) *cobra.Command {
	var fl bridgeagent.Setup
	var o bridgeagent.Options
	var guest vmFlags
	var keyLog string
	cmd := &cobra.Command{
		Use:   "agent --role host|gpu --agent-listen ADDR --agent-credential-file FILE --listen IP:PORT [--switch IP:PORT]",
		Short: "Run a bridge daemon that the manager programs: a bridge per lent GPU, hot-plug on the host",
		Long: `agent runs a bridge daemon under the manager's control. It serves the agent
API on --agent-listen (https with --agent-cert/--agent-key, the key mode
0600 and owned by the agent's user; plain http only with --insecure),
accepting only the credential in --agent-credential-file
(what 'dxpu ctl box|host add --agent-credential-out FILE' wrote; mode 0600,
owned by the agent's user (a link to it is followed);
SIGHUP re-reads it, --agent-cert/--agent-key and --manager-ca-file for
new connections: a file that fails the checks is logged and the previous
one stays in use).
The API caps connections at 256, 16 per client
address (the manager's, once it showed the credential, exempt), times
out idle ones after 60s and a request whose body does not follow its
headers within 5s: bind --agent-listen to the management network.
The manager's allocation saga then creates a bridge
per pair: all pairs share one UDP port, --listen (the ip:udp_port
registered as the bridge endpoint), told apart by the pair ID in each
frame; frames go to --switch (the UDP switch) or, without it, to the far
end's registered ip:udp_port. On Linux each pair has a socket of its own
on that port, which the kernel steers the pair's frames to (SO_REUSEPORT
and a classic BPF program: no privilege); a second agent on the port
is refused, as a plain socket's bind refuses it.

  --role gpu  an emulated GPU per pair (--pcie emu-gpu, the pair's model)
              or a memory device (--pcie memory); --box FILE (the box JSON
              given to ctl box add) limits it to that box's GPUs. A pair
              whose link goes down (the host side fell silent) and up
              again is reported to --manager: the allocation shows
              degraded while the link stays down past the manager's
              --degraded-after. Without --manager nothing is reported.
  --role host an emulated host whose virtual PCIe switch has a hot-plug
              downstream port for each of the first 32 of --ports (the
              host's ports as registered, 32..65536; pairs on the others
              are refused): hot-add enumerates the lent GPU
              (vendor 10de) on the pair's port, hot-remove and surprise
              removal take it away. A pair whose link goes down (the GPU
              side fell silent) is surprise-removed at once and reported to
              --manager with the agent's credential; when the link is up
              again the GPU is hot-added back and that is reported too:
              the allocation is degraded meanwhile, the GPU stays lent and
              healthy. With --vm the host is a QEMU guest booted here
              (the guest flags of 'dxpu vm run'; 8 slots on q35):
              hot-add is a device_add into it, removal a device_del. A
              guest that is lost (its tool exited, QEMU died) ends the
              agent: exit 1 with a line saying why, for its supervisor
              to start it again.

A flag that the role does not read is refused, naming it: --host-id,
--ports, --vm and the guest flags (those of 'dxpu vm run', with --vm only)
are the host's; --pcie, --box, --mem-base and --mem-size (--pcie memory
only) the GPU box's.

Example (a lab over http; see 'go doc ./internal/app/bridgeagent'):
  dxpu ctl box add box7.json --agent-credential-out box7.cred
  dxpu bridge agent --role gpu --box box7.json --agent-listen 10.1.0.7:7701 --insecure \
      --agent-credential-file box7.cred --listen 10.1.0.7:4791 --switch 10.1.0.1:8855 \
      --manager http://10.1.0.2:7700

Sizes (as 'dxpu bridge'): --mtu, --max-payload and, for a memory device,
--mps; a memory device facing a host end that announced a smaller
--max-payload completes with the largest Max Payload Size it takes and
logs a warning. Jumbo frames (--mtu 8972) with --max-payload 2048 and
--mps 2048 at both ends carry a 4 KiB read in 2 completions, not 16.

Buffers (as 'dxpu bridge'): --window, the TLPs in flight per direction of
every pair, and --credits, the header credits each flow-control class of
every pair advertises (data credits N x --max-payload / 16); each
1..32768, 1024 by default: about 1024 256-byte writes in flight (256 KiB),
a software bridge's round trip at 10 Gbit/s. A fabric whose bandwidth
times round trip is larger needs more, at both ends. Each pair's bridge
allocates (3 x 256 + --window) transmit slots and (--window + 3 x
--credits) receive slots of 16 + --max-payload + 4 bytes each, about 3 MiB
a pair with the defaults.

--key-log FILE appends every pair's traffic secrets to FILE (created 0600),
one line per secret, for 'dxpu pcap unseal' (see 'dxpu bridge --help'); it
holds no manager token or agent credential, but opens the frames it covers.

--metrics ADDR serves Prometheus metrics (GET /metrics; empty, the default:
off): every pair's bridge counters as 'dxpu bridge --metrics' serves them
(dxpu_bridge_*, labelled pair and role), from the pair's programming to its
removal, and the agent's own (dxpu_agent_pairs, dxpu_agent_pairs_up,
dxpu_agent_pairs_steered, dxpu_agent_dropped_*_total: frames the shared socket dropped before any
pair's bridge saw them); at most 64 connections, 8 per client address,
closed after 30s idle.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := numberFlags(cmd, []string{"keepalive", "dead-after", "mtu", "max-payload", "mps", "memory-mb"}, "completion-timeout", "spin"); err != nil {
				return exitCodeError{2, err}
			}
			if err := bufferFlags(cmd); err != nil {
				return exitCodeError{2, err}
			}
			if err := timerOrder(cmd); err != nil {
				return exitCodeError{2, err}
			}
			if err := agentRoleFlags(cmd, fl.Role, o.PCIe, fl.VM); err != nil {
				return exitCodeError{2, err}
			}
			if err := bridgeagent.CheckPorts(o.Ports); err != nil {
				return exitFor(err, 2)
			}
			o.Log, fl.Stdin, fl.VMOptions = e.log, cmd.InOrStdin(), guest.o
			fl.MPSGiven = cmd.Flags().Changed("mps")
			if err := fl.Apply(&o); err != nil {
				return exitFor(err, 2)
			}
			var closeLog func()
			var err error
			if o.KeyLog, closeLog, err = openKeyLog(keyLog, e); err != nil {
				return exitFor(err, 2)
			}
			defer closeLog()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			hup := bridgeagent.CatchHUP()
			return exitFor(bridgeagent.Run(ctx, o, func(a *bridgeagent.Agent, _ net.Addr) {
				go bridgeagent.ReloadCredentialOnHUP(ctx, hup, a, fl.CredentialFile, e.log)
			}), 1)
		},
	}
	f := cmd.Flags()
	f.StringVar(&fl.Role, "role", "", "host or gpu")
	f.StringVar(&o.AgentListen, "agent-listen", "", "TCP address of the agent API (the host:port of the registered agent_url)")
	f.StringVar(&o.CertFile, "agent-cert", "", "certificate (PEM) the agent API serves https with")
	f.StringVar(&o.KeyFile, "agent-key", "", "private key (PEM) of --agent-cert; must be 0600, owned by you")
	f.BoolVar(&o.Insecure, "insecure", false, "serve the agent API, and reach an http --manager, over plain http (lab only: the credential crosses the network in clear)")
	f.StringVar(&fl.CredentialFile, "agent-credential-file", "", "file (mode 0600) holding the agent credential the manager issued at registration")
	f.StringVar(&fl.Listen, "listen", "", "UDP address of the data plane: the bridge endpoint's ip:udp_port (all pairs share it)")
	f.StringVar(&fl.Switch, "switch", "", "UDP address frames go to (the UDP switch, e.g. 10.1.0.1:8855); empty: each pair's far end")
	f.IntVar(&o.Ports, "ports", bridgeagent.MinPorts, fmt.Sprintf("--role host: hot-plug ports, the host's ports as registered with the manager (%d..%d); GPUs go on the first 32, on a --vm q35 guest the first 8", bridgeagent.MinPorts, bridgeagent.MaxPorts))
	f.BoolVar(&fl.VM, "vm", false, "--role host: the host is a QEMU guest this agent boots and keeps up (see 'dxpu vm')")
	guest.add(cmd)
	_ = f.MarkHidden("bytes") // the guest only watches its bus
	f.StringVar(&o.HostID, "host-id", "", "--role host: refuse pairs for other hosts")
	f.StringVar(&o.PCIe, "pcie", bridgeagent.PCIeEmuGPU, "--role gpu: emu-gpu or memory")
	f.StringVar(&fl.BoxFile, "box", "", "--role gpu: the box JSON (as given to ctl box add); pairs for other boxes or GPUs are refused")
	f.StringVar(&fl.MemBase, "mem-base", "0x2000000000", "--pcie memory: base address")
	f.StringVar(&fl.MemSize, "mem-size", "64M", "--pcie memory: size in bytes, above 0 (suffixes K, M, G; base plus size within 64 bits)")
	f.DurationVar(&o.Keepalive, "keepalive", bridgeagent.DefaultKeepalive, "longest silence of a pair's bridge while up (above 0, below --dead-after)")
	f.DurationVar(&o.DeadAfter, "dead-after", bridgeagent.DefaultDeadAfter, "silence after which a pair's link is down (above --keepalive)")
	f.DurationVar(&o.CompletionTimeout, "completion-timeout", 0, "a forwarded request unanswered this long gets a CA completion (0, the default: twice --dead-after, both roles: an outage the link hides stays hidden from the requests outstanding across it)")
	f.DurationVar(&o.Spin, "spin", 0, "each pair's bridge polls the data-plane socket's queue this long after its last frames before sleeping, up to 1s (0: sleep at once): a busy pair then takes its frames without a wake-up, at the cost of a core polling per busy pair")
	bytesVar(f, &o.MTU, "mtu", 1472, "largest frame of every pair from the dxpu header on, in bytes (at most 9216, and the path's MTU less IP and UDP headers)")
	bytesVar(f, &o.MaxPayload, "max-payload", 512, "largest TLP payload of every pair in bytes (4..4096; the same at both ends)")
	bytesVar(f, &o.MPS, "mps", 256, "--pcie memory: Max Payload Size, largest completion payload in bytes (128..4096, at most --max-payload; less while a pair's host end takes less)")
	f.IntVar(&o.Window, "window", bridge.DefaultWindow, "TLPs in flight per direction of every pair: the retransmit window and the reorder window offered to the far end (1..32768, rounded up to a power of two)")
	f.IntVar(&o.Credits, "credits", bridge.DefaultHeaderCredits, "header credits each flow-control class of every pair advertises to the far end: its receive buffer in TLPs (1..32768; data credits N x --max-payload / 16)")
	f.StringVar(&o.Manager, "manager", "", "manager URL for the pairs' link-down and link-up reports (host: the GPU failed; gpu: the allocation is degraded while the host side is silent)")
	f.StringVar(&keyLog, "key-log", "", "append every pair's traffic secrets to this file (0600) for 'dxpu pcap unseal' (debugging: it opens the frames)")
	f.StringVar(&o.ManagerCAFile, "manager-ca-file", "", "CA (PEM) of an https --manager (default: the system's roots)")
	f.StringVar(&o.Metrics, "metrics", "", "serve Prometheus metrics on this TCP address (empty: off): every pair's bridge counters and the agent's")
	return cmd
}

// Flags of `dxpu bridge agent` that only one role, PCIe side or a --vm
// guest reads: the others took them and did nothing.
var (
	agentHostFlags   = []string{"host-id", "ports", "vm"}
	agentGPUFlags    = []string{"pcie", "box", "mem-base", "mem-size"}
	agentMemoryFlags = []string{"mem-base", "mem-size"}
	agentGuestFlags  = []string{"qemu", "kernel", "busybox", "guest-tool", "machine", "memory-mb", "accel", "dir", "serial-log"}
)

// agentRoleFlags refuses a flag given on the command line that the role
// (and, for --role gpu, --pcie; for --role host, --vm) does not read,
// naming the flag, its value and what it is for. A --role that is neither
// host nor gpu is left to Setup.Apply to refuse.
func agentRoleFlags(cmd *cobra.Command, role, pcie string, vm bool) error {
	switch role {
	case "gpu":
		return unreadFlags(cmd,
			flagGroup{append(append([]string(nil), agentHostFlags...), agentGuestFlags...), false, "--role host", "--role gpu"},
			flagGroup{agentMemoryFlags, pcie == bridgeagent.PCIeMemory, "--pcie " + bridgeagent.PCIeMemory, "--pcie " + pcie})
	case "host":
		return unreadFlags(cmd,
			flagGroup{agentGPUFlags, false, "--role gpu", "--role host"},
			flagGroup{agentGuestFlags, vm, "--vm (the guest)", "a host without --vm"})
	}
	return nil
}

// flagGroup is a group of flags that only one setting reads: read says
// whether it is in force, isFor names it and not the setting in force
// instead.
type flagGroup struct {
	names      []string
	read       bool
	isFor, not string
}

// unreadFlags refuses the first flag given on the command line of the
// first group not read ("--mem-size 1M is for --pcie memory, not --pcie
// emu-gpu"): the daemon took it and did nothing. Defaults are not given.
func unreadFlags(cmd *cobra.Command, groups ...flagGroup) error {
	for _, g := range groups {
		if g.read {
			continue
		}
		for _, name := range g.names {
			if fl := cmd.Flags().Lookup(name); fl != nil && fl.Changed {
				return fmt.Errorf("%s is for %s, not %s", givenFlag(fl), g.isFor, g.not)
			}
		}
	}
	return nil
}

// givenFlag is a flag as the command line gave it: --name VALUE (a value
// that is empty or holds a space quoted), or --name alone for a boolean.
func givenFlag(fl *pflag.Flag) string {
	if fl.Value.Type() == "bool" && fl.Value.String() == "true" {
		return "--" + fl.Name
	}
	v := flagText(fl)
	if v == "" || strings.ContainsAny(v, " \t\n\"") {
		v = strconv.Quote(v)
	}
	return "--" + fl.Name + " " + v
}
