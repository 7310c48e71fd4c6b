package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/internal/app/capture"
)

//go:generate go run . pcap testdata --dir ../../testdata/pcap

// newPcapCmd builds `dxpu pcap` and its subcommands (package
// internal/app/capture does the work).
func newPcapCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pcap",
		Short: "Convert TLP captures between encapsulations, generate synthetic TLP traffic, summarise captures",
		Long: `Captures are pcap (microsecond or nanosecond) or pcapng, read with the format
detected, holding Ethernet frames that carry TLPs as NetTLP (UDP, ports
0x3000+tag), dxpu over Ethernet (EtherType 0x88B5) or dxpu over UDP/IPv4
(port 8855), with or without 802.1Q tags.`,
	}
	cmd.AddCommand(newPcapGenerateCmd(), newPcapConvertCmd(), newPcapInfoCmd(), newPcapUnsealCmd(), newPcapCaptureCmd(), newPcapTestdataCmd())
	return cmd
}

func newPcapGenerateCmd() *cobra.Command {
	var o capture.GenerateOptions
	cmd := &cobra.Command{
		Use:   "generate --out FILE",
		Short: "Write synthetic TLP traffic (valid TLPs of every kind) to a capture",
		Long: `Generate writes --count frames of synthetic traffic between --pairs host-GPU
pairs: random TLPs that obey the PCIe rules that 'dxpu tlp decode' checks,
with 10-bit tags, 32- and 64-bit addresses, ECRC digests and poisoned TLPs
now and then. dxpu frames carry 1..--max-tlps TLPs up to --ether-mtu, running
sequence numbers per pair and direction, acknowledgements and credit
limits; --control percent of them are ACK, NAK or CREDIT messages. The same
--seed gives the same bytes.

--kind: mix (every kind, memory traffic weighted), mem, or names (MRd,CplD).
--encap: nettlp, dxpu-eth, dxpu-udp, or mix (frames cycle through dxpu-eth,
dxpu-eth with --vlan, dxpu-udp and nettlp). --vlan N tags frames with VLAN N
(-1: untagged; with mix, only the second dxpu-eth flavour).

--count is at most 10000000, and the capture may grow to at most 16 GiB
(reckoned with every frame as long as --ether-mtu allows, or --snaplen keeps).
--out is replaced only once the capture is whole, and may not be "-" (a
capture is written to a file).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := oneSpelling(cmd.Flags(), "ether-mtu", "mtu"); err != nil {
				return exitCodeError{2, err}
			}
			ctx, stop := interruptible(cmd)
			defer stop()
			return pcapExit(capture.Generate(ctx, o, cmd.OutOrStdout()))
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Out, "out", "", "output capture")
	f.StringVar(&o.Kind, "kind", "mix", "TLP kinds: mix, mem, or a list such as MRd,MWr,CplD")
	f.StringVar(&o.Encap, "encap", "mix", "nettlp, dxpu-eth, dxpu-udp or mix")
	f.IntVar(&o.VLAN, "vlan", -1, "802.1Q VLAN ID for tagged frames (-1: untagged)")
	f.IntVar(&o.Count, "count", 100, "number of frames (at most 10000000)")
	f.Uint64Var(&o.Seed, "seed", 1, "random seed (same seed, same bytes)")
	f.IntVar(&o.Pairs, "pairs", 4, "number of host-GPU pairs (pair IDs)")
	f.IntVar(&o.MaxTLPs, "max-tlps", 8, "most TLPs per dxpu frame")
	f.IntVar(&o.MaxDW, "max-dw", 32, "longest TLP payload or read, in DWs")
	etherMTUVar(f, &o.MTU, "largest Ethernet payload of a frame (after the Ethernet header and any VLAN tag), in bytes")
	f.IntVar(&o.Control, "control", 10, "percent of dxpu frames that are ACK/NAK/CREDIT messages")
	bytesVar(f, &o.Snaplen, "snaplen", 0, "cut records to this many bytes, like a capture's snap length (0: whole)")
	addPcapOutFlags(cmd, &o.PcapNG, &o.Nanos, "nanosecond timestamps (default: microseconds)")
	return cmd
}

// addPcapOutFlags adds the output options shared by the subcommands;
// nanosHelp says what the command's default resolution is.
func addPcapOutFlags(cmd *cobra.Command, pcapng, nanos *bool, nanosHelp string) {
	cmd.Flags().BoolVar(pcapng, "pcapng", false, "write pcapng instead of pcap")
	cmd.Flags().BoolVar(nanos, "nanos", false, nanosHelp)
}

// keepsResolution is the --nanos help of the commands that copy the
// input's timestamps.
const keepsResolution = "nanosecond timestamps; --nanos=false microseconds (default: the input's resolution)"

func newPcapConvertCmd() *cobra.Command {
	var o capture.ConvertOptions
	var nanos bool
	cmd := &cobra.Command{
		Use:   "convert --in A --out B --to nettlp|dxpu-eth|dxpu-udp",
		Short: "Re-encapsulate the TLPs of a capture",
		Long: `Convert reads every frame of --in and writes its TLPs to --out in another
encapsulation, keeping timestamps and MAC addresses. A dxpu frame becomes
one dxpu frame (same TLPs, pair, sequence, ack and credits) or one NetTLP
frame per TLP; a NetTLP frame becomes a dxpu frame with one TLP (pair
--pair, sequence numbers counted per direction). IPv4 addresses are kept,
or --src-ip/--dst-ip where the input has none.

--vlan -1 keeps the input's outer VLAN tag, 0 removes tags, 1..4094 sets one.

--pack (to dxpu) gathers consecutive NetTLP TLPs between the same two
endpoints into dxpu frames of up to --ether-mtu bytes of Ethernet payload,
as a bridge sends them; each packed frame takes the timestamp of its first
TLP.

TLPs that the capture's snap length cut short stay cut: the output frame is
built with the TLP's declared length and its record keeps only the bytes
the input had (the original length says how long the frame was). Frames
without TLPs are skipped. Frames that do not parse are reported on stderr
with their number (the first 1000, then a count of the rest); exit status 1
if any, or if --in is not a capture of Ethernet frames, 2 for usage or I/O
errors. --out is replaced only once the whole output is written, and may
be neither --in nor "-" (a capture is written to a file).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := oneSpelling(cmd.Flags(), "ether-mtu", "mtu"); err != nil {
				return exitCodeError{2, err}
			}
			if cmd.Flags().Changed("nanos") {
				o.Nanos = &nanos
			}
			ctx, stop := interruptible(cmd)
			defer stop()
			return pcapExit(capture.Convert(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.In, "in", "", "input capture (pcap or pcapng)")
	f.StringVar(&o.Out, "out", "", "output capture")
	f.StringVar(&o.To, "to", "", "nettlp, dxpu-eth or dxpu-udp")
	f.IntVar(&o.VLAN, "vlan", -1, "-1 keep the input's tag, 0 untagged, 1..4094 tag with this VLAN")
	f.Uint32Var(&o.Pair, "pair", 1, "dxpu pair ID for TLPs that come from NetTLP frames")
	udpPortVar(f, &o.UDPPort, "dxpu UDP port (reading and writing)")
	f.StringVar(&o.SrcIP, "src-ip", "10.0.0.1", "IPv4 source where the input has no IPv4")
	f.StringVar(&o.DstIP, "dst-ip", "10.0.0.2", "IPv4 destination where the input has no IPv4")
	f.BoolVar(&o.Pack, "pack", false, "pack consecutive NetTLP TLPs between the same ends into dxpu frames")
	etherMTUVar(f, &o.MTU, "largest Ethernet payload of a packed dxpu frame (after the Ethernet header and any VLAN tag), in bytes")
	addPcapOutFlags(cmd, &o.PcapNG, &nanos, keepsResolution)
	return cmd
}

func newPcapInfoCmd() *cobra.Command {
	var udpPort uint16
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "info FILE...",
		Short: "Count frames per encapsulation, TLPs per kind, truncated and bad frames",
		Long: `Info prints, for each capture, the number of frames per encapsulation,
VLAN-tagged frames, dxpu messages without TLPs, TLPs per kind (from their
Fmt and Type only: 'dxpu tlp decode --pcap' validates them), TLPs cut by the
snap length, frames the snap length cut within their headers (before the
TLPs: snaplen_cut_frames, not a fault of the frame), and frames that do not
parse, each reported on stderr with its number (the first 1000, then a
count of the rest). Sealed frames (keyed pairs) count as "sealed", by
encapsulation and message type; 'dxpu pcap unseal' opens their TLPs. Exit
status 1 if any frame did not parse or a capture is not of Ethernet frames,
2 for I/O errors.
--json prints one object, indented; for several captures one object per
capture and line (JSON lines).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return exitFor(capture.Info(args, udpPort, asJSON, cmd.OutOrStdout(), cmd.ErrOrStderr()), 2)
		},
	}
	udpPortVar(cmd.Flags(), &udpPort, "dxpu UDP port (datagrams to or from it)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object (indented), or for several captures one per line")
	return cmd
}

func newPcapUnsealCmd() *cobra.Command {
	var o capture.UnsealOptions
	var nanos bool
	cmd := &cobra.Command{
		Use:   "unseal --key-log FILE IN OUT",
		Short: "Open the sealed frames of a capture with the bridges' key log",
		Long: `Unseal writes IN to OUT with every sealed dxpu frame (flag SEALED, over
Ethernet or UDP) replaced by the plain frame it was sealed from: SEALED
clear, the security header and tag gone, the TLPs or control message in
clear, IPv4 and UDP lengths fixed. The secrets come from --key-log, the file
'dxpu bridge --key-log' or 'dxpu bridge agent --key-log' wrote (either side's
log opens both directions). OUT is then what 'pcap info', 'tlp decode
--pcap' and 'replay', each given the same --udp-port, and the Wireshark
dissector read. Other frames are copied as they are.

A dxpu UDP datagram is one to or from --udp-port; --out-udp-port N writes N
in its place (for tools that know only port 8855). Sealed frames that do not
open (no secret of their pair and generation, none that authenticates them,
cut by the snap length, malformed) are left out of OUT and counted: one
stderr line per reason with the first frame's number. Exit status 1 if any,
2 for usage or I/O errors. OUT is replaced only once it is whole, and may
be neither IN nor the key log, nor "-" (a capture is written to a file); it
holds the frames in clear, so it is written mode 0600 (a new file, whatever
the mode of the one it replaces).

The summary says how many frames were read, unsealed (handshake ones
among them), copied as they were and not opened, and how many secrets the
key log holds; --json prints it as one object, indented: in, out, key_log,
frames, unsealed_frames, handshake_frames, copied_frames, unopened_frames,
secrets.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.In, o.Out = args[0], args[1]
			if cmd.Flags().Changed("nanos") {
				o.Nanos = &nanos
			}
			ctx, stop := interruptible(cmd)
			defer stop()
			return pcapExit(capture.UnsealContext(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.KeyLog, "key-log", "", "the bridges' key log (--key-log of dxpu bridge or bridge agent); must be 0600, owned by you")
	udpPortVar(f, &o.UDPPort, "dxpu UDP port (datagrams to or from it)")
	outUDPPortVar(f, &o.OutUDPPort, "write this port in place of --udp-port, 1..65535 (0: keep)")
	addPcapOutFlags(cmd, &o.PcapNG, &nanos, keepsResolution)
	f.BoolVar(&o.JSON, "json", false, "print the summary as one JSON object (indented)")
	return cmd
}

func newPcapCaptureCmd() *cobra.Command {
	var o capture.LiveOptions
	cmd := &cobra.Command{
		Use:   "capture --interface IF --out FILE",
		Short: "Capture a fabric's dxpu frames from an interface (AF_PACKET; root)",
		Long: `Capture writes the frames seen on --interface to --out (pcap, or --pcapng) with
nanosecond timestamps, until Ctrl-C, --count frames or --duration; frames the
kernel queued before the end are written too, and the summary names what the
kernel dropped. By default a BPF filter in the kernel keeps only dxpu frames:
EtherType 0x88B5, or IPv4/UDP to or from --udp-port, untagged or behind one
802.1Q tag (a tag the NIC took off is put back). --all keeps every frame;
--bpf takes any classic BPF program in the decimal form 'tcpdump -ddd EXPR'
prints (the third example is 'tcpdump -ddd ip': IPv4 frames only); an
empty --bpf is refused:

  dxpu pcap capture --interface eth1 --udp-port 7001 --out fabric.pcap --duration 10s
  dxpu pcap capture --interface lo --all --out lo.pcap --count 1000
  dxpu pcap capture --interface lo --bpf '4,40 0 0 12,21 0 1 2048,6 0 0 262144,6 0 0 0' --out ipv4.pcap

On loopback each frame is written once. Frames are written as the wire
carries them: a UDP segmentation-offload send (the bridges batch that way),
which a packet socket sees as one glued datagram, is written as the datagrams
it leaves as, with the checksums the NIC fills in. Needs Linux and root (or
CAP_NET_RAW). Sealed frames open with 'dxpu pcap unseal'. --out is written
when the capture ends (an error leaves it as it was); it may not be "-" (a
capture is written to a file).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("bpf") && strings.TrimSpace(o.BPF) == "" {
				// What "$(tcpdump -ddd ...)" gives when tcpdump is missing or
				// fails: the default filter would run in its place unseen.
				return exitCodeError{2, errors.New(`capture: --bpf "" is empty (did the command meant to print the program fail?): ` +
					"give a program as 'tcpdump -ddd EXPR' prints it, or leave --bpf out (dxpu frames of --udp-port) or use --all")}
			}
			ctx, stop := interruptible(cmd) // Ctrl-C ends the capture: what it has is kept
			defer stop()
			return exitFor(capture.Live(ctx, o, cmd.OutOrStdout()), 2)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Interface, "interface", "", "network interface to capture on")
	f.StringVar(&o.Out, "out", "", "output capture")
	udpPortVar(f, &o.UDPPort, "dxpu UDP port the default filter keeps (either direction)")
	f.BoolVar(&o.All, "all", false, "keep every frame (no filter)")
	f.StringVar(&o.BPF, "bpf", "", "classic BPF program in the decimal form 'tcpdump -ddd EXPR' prints, instead of the dxpu filter")
	f.IntVar(&o.Count, "count", 0, "stop after this many frames (0: no limit)")
	f.DurationVar(&o.Duration, "duration", 0, "stop after this long (0: until Ctrl-C)")
	bytesVar(f, &o.Snaplen, "snaplen", 0, "keep this many bytes of each frame, up to 256K (0: 65535)")
	f.BoolVar(&o.PcapNG, "pcapng", false, "write pcapng instead of pcap")
	return cmd
}

func newPcapTestdataCmd() *cobra.Command {
	var dir string
	var check bool
	cmd := &cobra.Command{
		Use:   "testdata --dir DIR",
		Short: "Regenerate the replay corpus of testdata/pcap (deterministic)",
		Long: `Testdata writes the synthetic captures of testdata/pcap and their README.md
into --dir. The output depends only on this program, so regenerating gives
identical bytes; --check compares instead of writing and exits 1 on any
difference.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return exitFor(capture.Testdata(dir, check, cmd.OutOrStdout()), 2)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory of the corpus (testdata/pcap)")
	cmd.Flags().BoolVar(&check, "check", false, "compare with --dir instead of writing")
	return cmd
}

// interruptible is the command's context, ended by Ctrl-C or SIGTERM: a
// command writing a capture then drops its temporary file instead of
// dying with it on disk (capture keeps what it captured).
func interruptible(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
}

// pcapExit is exitFor for the commands that write captures: 130 (as a
// shell reports SIGINT) for an interrupted one, else 2 by default.
func pcapExit(err error) error {
	if errors.Is(err, context.Canceled) {
		return exitCodeError{130, err}
	}
	return exitFor(err, 2)
}
