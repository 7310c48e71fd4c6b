package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sort"
	"strings"

	"github.com/google/gopacket"
	"github.com/spf13/cobra"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/tlp/pcapio"
	"github.com/dxpu/dxpu/xdp"
)

// The expected outputs of the replay corpus (after pcap.go's directive has
// regenerated the corpus itself: go generate runs a package's files in
// name order).
//go:generate sh -c "cd ../.. && testdata/switch/regen.sh"

var replayFlags struct {
	pcap, table, mode, out, expect, port string
	portAddrs                            []string
	udpPort                              uint16
}

var replayCmd = &cobra.Command{
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
status 1 names the first difference.`,
	Args: cobra.NoArgs,
	RunE: runReplay,
}

func init() {
	f := replayCmd.Flags()
	f.StringVar(&replayFlags.pcap, "pcap", "", "input capture (pcap or pcapng, optionally gzipped)")
	f.StringVar(&replayFlags.table, "table", "", "forwarding table (JSON, as the manager serves it)")
	f.StringVar(&replayFlags.mode, "mode", "go", "switch path: go (userspace) or xdp (BPF_PROG_TEST_RUN, root)")
	f.StringVar(&replayFlags.out, "out", "", "write forwarded frames to this capture")
	f.StringVar(&replayFlags.expect, "expect", "", "compare forwarded frames with this capture")
	f.StringVar(&replayFlags.port, "port", "", "ingress port of frames from unknown MACs (default: first port)")
	f.StringArrayVar(&replayFlags.portAddrs, "port-addr", nil, "switch port addresses, NAME=MAC[/IPv4] (repeatable)")
	f.Uint16Var(&replayFlags.udpPort, "udp-port", switching.DefaultUDPPort, "UDP port of dxpu frames")
	rootCmd.AddCommand(replayCmd)
}

func replayUsage(format string, a ...any) error { return exitCodeError{2, fmt.Errorf(format, a...)} }

// parsePortAddrs applies NAME=MAC[/IPv4] overrides to ports.
func parsePortAddrs(ports map[string]switching.Port, specs []string) error {
	for _, s := range specs {
		name, addr, ok := strings.Cut(s, "=")
		p, known := ports[name]
		if !ok || !known {
			return fmt.Errorf("--port-addr %q: want NAME=MAC[/IPv4] with NAME a port of the table", s)
		}
		macS, ipS, hasIP := strings.Cut(addr, "/")
		mac, err := net.ParseMAC(macS)
		if err != nil || len(mac) != 6 {
			return fmt.Errorf("--port-addr %q: bad MAC %q", s, macS)
		}
		p.MAC = mac
		if hasIP {
			ip, err := netip.ParseAddr(ipS)
			if err != nil || !ip.Is4() {
				return fmt.Errorf("--port-addr %q: %q is not an IPv4 address", s, ipS)
			}
			p.IP = ip
		}
		ports[name] = p
	}
	return nil
}

type replayRecord struct {
	ci   gopacket.CaptureInfo
	data []byte
}

func readCaptureFile(path string) ([]replayRecord, error) {
	r, err := pcapio.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var recs []replayRecord
	for {
		data, ci, err := r.Next()
		if errors.Is(err, io.EOF) {
			return recs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		recs = append(recs, replayRecord{ci, append([]byte(nil), data...)})
	}
}

func runReplay(cmd *cobra.Command, _ []string) error {
	fl := replayFlags
	if fl.pcap == "" || fl.table == "" {
		return replayUsage("replay: --pcap and --table are required")
	}
	if fl.mode != "go" && fl.mode != "xdp" {
		return replayUsage("replay: --mode %q: want go or xdp", fl.mode)
	}
	tbl, err := switching.LoadTable(fl.table)
	if err != nil {
		return exitCodeError{2, err}
	}
	names := switching.PortNames(tbl)
	if len(names) == 0 {
		return replayUsage("replay: table %s has no pairs", fl.table)
	}
	ports := switching.SyntheticPorts(names)
	if err := parsePortAddrs(ports, fl.portAddrs); err != nil {
		return replayUsage("replay: %v", err)
	}
	def := names[0]
	if fl.port != "" {
		if _, ok := ports[fl.port]; !ok {
			return replayUsage("replay: --port %q is not a port of the table (%s)", fl.port, strings.Join(names, ", "))
		}
		def = fl.port
	}
	recs, err := readCaptureFile(fl.pcap)
	if err != nil {
		return exitCodeError{2, err}
	}
	raw := make([][]byte, len(recs))
	for i, r := range recs {
		raw[i] = r.data
	}
	frames := switching.AssignPorts(tbl, raw, def)

	var outs []switching.Outcome
	switch fl.mode {
	case "go":
		fwd := switching.NewForwarder(fl.udpPort)
		rules, skipped, err := switching.Compile(tbl, ports, fl.udpPort)
		if err != nil {
			return exitCodeError{2, err}
		}
		if len(skipped) > 0 {
			return exitCodeError{2, skipped[0]}
		}
		fwd.SetPorts(ports)
		fwd.Update(rules)
		outs = fwd.Replay(frames, ports)
	case "xdp":
		specs := make([]xdp.PortSpec, 0, len(names))
		for _, n := range names {
			specs = append(specs, ports[n])
		}
		outs, _, err = xdp.Replay(tbl, specs, xdp.Options{UDPPort: fl.udpPort}, frames)
		if err != nil {
			return exitCodeError{2, fmt.Errorf("replay --mode xdp (needs root and BPF): %w", err)}
		}
	}

	actions := map[string]int{}
	var forwarded []replayRecord
	for i, o := range outs {
		key := map[uint32]string{switching.XDPRedirect: "redirect", switching.XDPDrop: "drop", switching.XDPPass: "pass"}[o.Action]
		if fl.mode == "go" {
			key = o.Verdict.String() + "/" + o.Reason.String()
		}
		actions[key]++
		if o.Frame != nil {
			ci := recs[i].ci
			ci.CaptureLength, ci.Length = len(o.Frame), len(o.Frame)
			forwarded = append(forwarded, replayRecord{ci, o.Frame})
		}
	}
	keys := make([]string, 0, len(actions))
	for k := range actions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(cmd.OutOrStdout(), "%s: %d frames, %d forwarded (%s path)\n", fl.pcap, len(recs), len(forwarded), fl.mode)
	for _, k := range keys {
		fmt.Fprintf(cmd.OutOrStdout(), "  %-28s %d\n", k, actions[k])
	}
	if fl.out != "" {
		w, err := pcapio.Create(fl.out, pcapio.WriterOptions{Nanos: true})
		if err != nil {
			return exitCodeError{2, err}
		}
		for _, r := range forwarded {
			if err := w.WritePacket(r.ci, r.data); err != nil {
				w.Close()
				return exitCodeError{2, err}
			}
		}
		if err := w.Close(); err != nil {
			return exitCodeError{2, err}
		}
	}
	if fl.expect != "" {
		exp, err := readCaptureFile(fl.expect)
		if err != nil {
			return exitCodeError{2, err}
		}
		if err := compareReplay(forwarded, exp); err != nil {
			return exitCodeError{1, fmt.Errorf("replay: output differs from %s: %w", fl.expect, err)}
		}
		fmt.Fprintf(cmd.OutOrStdout(), "output matches %s (%d frames)\n", fl.expect, len(exp))
	}
	return nil
}

func compareReplay(got, want []replayRecord) error {
	for i := 0; i < min(len(got), len(want)); i++ {
		g, w := got[i].data, want[i].data
		if !bytes.Equal(g, w) {
			at := 0
			for at < min(len(g), len(w)) && g[at] == w[at] {
				at++
			}
			return fmt.Errorf("forwarded frame %d differs at byte %d (%d vs %d bytes)", i+1, at, len(g), len(w))
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("%d frames forwarded, %d expected", len(got), len(want))
	}
	return nil
}
