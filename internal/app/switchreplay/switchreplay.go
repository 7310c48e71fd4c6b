package switchreplay

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sort"
	"strings"

	"github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/app/jsonfile"
	"github.com/dxpu/dxpu/tlp/pcapio"
	"github.com/dxpu/dxpu/xdp"
	"github.com/google/gopacket"
)

func usage(format string, a ...any) error { return apperr.Usage(fmt.Errorf(format, a...)) }

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

// Options are `dxpu replay`'s.
type Options struct {
	Pcap, Table string // input capture, forwarding table (JSON)
	Mode        string // go (userspace) or xdp (BPF_PROG_TEST_RUN, root)
	Out         string // forwarded frames to this capture ("": none)
	Expect      string // compare forwarded frames with this capture ("": no)
	Port        string // ingress port of frames from unknown MACs ("": first)
	PortAddrs   []string
	UDPPort     uint16
}

// Run switches every frame of o.Pcap as the switch would and prints what
// happened to stdout. Bad options and unreadable files are
// apperr.ErrUsage; forwarded frames that differ from o.Expect are
// apperr.ErrFailed.
func Run(o Options, stdout io.Writer) error {
	fl := o
	if fl.Pcap == "" || fl.Table == "" {
		return usage("replay: --pcap and --table are required")
	}
	if fl.Mode != "go" && fl.Mode != "xdp" {
		return usage("replay: --mode %q: want go or xdp", fl.Mode)
	}
	tbl, err := switching.LoadTable(fl.Table)
	if err != nil {
		return apperr.Usage(jsonfile.ExplainFile(err, fl.Table, switching.TableFileForm))
	}
	names := switching.PortNames(tbl)
	if len(names) == 0 {
		return usage("replay: table %s has no pairs", fl.Table)
	}
	ports := switching.SyntheticPorts(names)
	if err := parsePortAddrs(ports, fl.PortAddrs); err != nil {
		return usage("replay: %v", err)
	}
	def := names[0]
	if fl.Port != "" {
		if _, ok := ports[fl.Port]; !ok {
			return usage("replay: --port %q is not a port of the table (%s)", fl.Port, strings.Join(names, ", "))
		}
		def = fl.Port
	}
	recs, err := readCaptureFile(fl.Pcap)
	if err != nil {
		return apperr.Usage(err)
	}
	raw := make([][]byte, len(recs))
	for i, r := range recs {
		raw[i] = r.data
	}
	frames := switching.AssignPorts(tbl, raw, def)

	var outs []switching.Outcome
	switch fl.Mode {
	case "go":
		fwd := switching.NewForwarder(fl.UDPPort)
		rules, skipped, err := switching.Compile(tbl, ports, fl.UDPPort)
		if err != nil {
			return apperr.Usage(err)
		}
		if len(skipped) > 0 {
			return apperr.Usage(skipped[0])
		}
		fwd.SetPorts(ports)
		fwd.Update(rules)
		outs = fwd.Replay(frames, ports)
	case "xdp":
		specs := make([]xdp.PortSpec, 0, len(names))
		for _, n := range names {
			specs = append(specs, ports[n])
		}
		outs, _, err = xdp.Replay(tbl, specs, xdp.Options{UDPPort: fl.UDPPort}, frames)
		if err != nil {
			return apperr.Usage(fmt.Errorf("replay --mode xdp (needs root and BPF): %w", err))
		}
	}

	actions := map[string]int{}
	var forwarded []replayRecord
	for i, o := range outs {
		key := map[uint32]string{switching.XDPRedirect: "redirect", switching.XDPDrop: "drop", switching.XDPPass: "pass"}[o.Action]
		if fl.Mode == "go" {
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
	fmt.Fprintf(stdout, "%s: %d frames, %d forwarded (%s path)\n", fl.Pcap, len(recs), len(forwarded), fl.Mode)
	for _, k := range keys {
		fmt.Fprintf(stdout, "  %-28s %d\n", k, actions[k])
	}
	if fl.Out != "" {
		w, err := pcapio.Create(fl.Out, pcapio.WriterOptions{Nanos: true})
		if err != nil {
			return apperr.Usage(err)
		}
		for _, r := range forwarded {
			if err := w.WritePacket(r.ci, r.data); err != nil {
				w.Close()
				return apperr.Usage(err)
			}
		}
		if err := w.Close(); err != nil {
			return apperr.Usage(err)
		}
	}
	if fl.Expect != "" {
		exp, err := readCaptureFile(fl.Expect)
		if err != nil {
			return apperr.Usage(err)
		}
		if err := compareReplay(forwarded, exp); err != nil {
			return apperr.Failed(fmt.Errorf("replay: output differs from %s: %w", fl.Expect, err))
		}
		fmt.Fprintf(stdout, "output matches %s (%d frames)\n", fl.Expect, len(exp))
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
