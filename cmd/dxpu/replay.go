package main

import (
	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/internal/app/switchreplay"
)

// The expected outputs of the replay corpus (after pcap.go's directive has
// regenerated the corpus itself: go generate runs a package's files in
// name order).
//go:generate sh -c "cd ../.. && testdata/switch/regen.sh"

// newReplayCmd builds `dxpu replay` (package internal/app/switchreplay
// runs it).
func newReplayCmd() *cobra.Command {
	var o switchreplay.Options
	cmd := &cobra.Command{
		Use:   "replay --pcap FILE --table FILE [--mode go|xdp] [--out OUT.pcap] [--expect EXP.pcap]",
		Short: "Replay a capture through the switch (userspace path or XDP test run) and compare the output",
		Long: `Replay switches every frame of a capture as the dxpu switch would and writes
the frames it forwards, rewritten, to --out (pcap; timestamps of the input).

Each frame arrives on the port of the table endpoint whose MAC is its source
address, or on --port when no endpoint has it. Switch ports are the table's
ports; port i (sorted by name) has MAC 02:5e:00:00:00:i and no IPv4 address
unless --port-addr NAME=MAC[/IPv4] says otherwise.

--mode go runs the userspace forwarding path; --mode xdp runs the XDP program
with BPF_PROG_TEST_RUN in a private network namespace (root). With --expect
the forwarded frames must equal the expected capture's, frame by frame: exit
status 1 names the first difference. The capture is read, switched and
written frame by frame, so its size does not matter; one of another link
type than Ethernet is refused (exit status 1).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return exitFor(switchreplay.Run(o, cmd.OutOrStdout()), 2)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Pcap, "pcap", "", "input capture (pcap or pcapng, optionally gzipped)")
	f.StringVar(&o.Table, "table", "", "forwarding table (JSON, as the manager serves it)")
	f.StringVar(&o.Mode, "mode", "go", "switch path: go (userspace) or xdp (BPF_PROG_TEST_RUN, root)")
	f.StringVar(&o.Out, "out", "", "write forwarded frames to this capture")
	f.StringVar(&o.Expect, "expect", "", "compare forwarded frames with this capture")
	f.StringVar(&o.Port, "port", "", "ingress port of frames from unknown MACs (default: first port)")
	f.StringArrayVar(&o.PortAddrs, "port-addr", nil, "switch port addresses, NAME=MAC[/IPv4] (repeatable)")
	udpPortVar(f, &o.UDPPort, "UDP port of dxpu frames")
	return cmd
}
