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
	"github.com/dxpu/dxpu/internal/app/capture"
	"github.com/dxpu/dxpu/internal/app/jsonfile"
	"github.com/dxpu/dxpu/tlp/pcapio"
	"github.com/dxpu/dxpu/xdp"
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
// happened to stdout. The capture is streamed: memory does not grow with
// it. Bad options and unreadable files are apperr.ErrUsage; a capture of
// another link type than Ethernet, and forwarded frames that differ from
// o.Expect, are apperr.ErrFailed.
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
	if fl.Out != "" {
		// Writing --out must not destroy what the replay reads.
		for _, in := range []struct{ name, path string }{{"--pcap", fl.Pcap}, {"--table", fl.Table}, {"--expect", fl.Expect}} {
			if in.path == "" {
				continue
			}
			if err := capture.SameFile("replay", "--out", fl.Out, in.name, in.path); err != nil {
				return err
			}
		}
	}
	in, err := pcapio.OpenEthernet(fl.Pcap)
	if errors.Is(err, pcapio.ErrLinkType) {
		return apperr.Failed(err) // bad input: no TLP frames to switch
	}
	if err != nil {
		return apperr.Usage(err)
	}
	defer in.Close()
	rp := &replayer{path: fl.Pcap, in: in, byMAC: switching.IngressByMAC(tbl), def: def,
		actions: map[outcomeKey]int{}}
	if fl.Expect != "" {
		if rp.exp, err = pcapio.Open(fl.Expect); err != nil {
			return apperr.Usage(err)
		}
		defer rp.exp.Close()
		rp.expPath = fl.Expect
	}
	if fl.Out != "" {
		if rp.outFile, err = capture.CreateOutput(fl.Out, pcapio.WriterOptions{Nanos: true}); err != nil {
			return apperr.Usage(err)
		}
		defer rp.outFile.Abort() // a no-op once committed
		rp.out = rp.outFile.Writer
	}

	// The capture is read, switched, written and compared record by record:
	// memory stays bounded whatever its size.
	switch fl.Mode {
	case "go":
		fwd := switching.NewForwarder(fl.UDPPort)
		rules, skipped, cerr := switching.Compile(tbl, ports, fl.UDPPort)
		if cerr == nil && len(skipped) > 0 {
			cerr = skipped[0]
		}
		if cerr != nil {
			return apperr.Usage(cerr)
		}
		fwd.SetPorts(ports)
		fwd.Update(rules)
		var buf []byte
		err = rp.run(func(f switching.ReplayFrame) (switching.Outcome, error) {
			buf = append(append(buf[:0], make([]byte, switching.Headroom)...), f.Data...)
			res := fwd.Forward(buf, switching.Headroom, ports[f.Port].Index)
			o := switching.Outcome{Action: res.Verdict.XDPAction(), Verdict: res.Verdict, Reason: res.Reason}
			if res.Verdict == switching.VerdictForward {
				o.Frame = buf[res.Off:]
			}
			return o, nil
		})
	case "xdp":
		specs := make([]xdp.PortSpec, 0, len(names))
		for _, n := range names {
			specs = append(specs, ports[n])
		}
		_, err = xdp.ReplayStream(tbl, specs, xdp.Options{UDPPort: fl.UDPPort}, rp.run)
		if err != nil && rp.err == nil {
			err = fmt.Errorf("replay --mode xdp (needs root and BPF): %w", err)
		}
	}
	if err == nil && rp.out != nil {
		err = rp.outFile.Commit()
		rp.out = nil
	}
	if err == nil {
		err = rp.finishExpect()
	}
	if err != nil {
		return apperr.Usage(err)
	}

	actions := map[string]int{}
	for k, n := range rp.actions {
		name := xdpActions[k.action]
		if fl.Mode == "go" {
			name = k.verdict.String() + "/" + k.reason.String()
		}
		actions[name] += n
	}
	keys := make([]string, 0, len(actions))
	for k := range actions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(stdout, "%s: %d frames, %d forwarded (%s path)\n", fl.Pcap, rp.frames, rp.forwarded, fl.Mode)
	for _, k := range keys {
		fmt.Fprintf(stdout, "  %-28s %d\n", k, actions[k])
	}
	if rp.exp != nil {
		if rp.diff != nil {
			return apperr.Failed(fmt.Errorf("replay: output differs from %s: %w", fl.Expect, rp.diff))
		}
		fmt.Fprintf(stdout, "output matches %s (%d frames)\n", fl.Expect, rp.expected)
	}
	return nil
}

// replayer feeds a capture to a switch path frame by frame, tallies the
// outcomes, writes the forwarded frames and compares them with the
// expected capture as they come.
type replayer struct {
	path    string
	in      *pcapio.Reader
	byMAC   map[[6]byte]string
	def     string
	actions map[outcomeKey]int // named once at the end: no string per frame

	out       *pcapio.Writer
	outFile   *capture.Output // out's file, put in place at the end
	exp       *pcapio.Reader
	expPath   string
	expDone   bool  // exp has no more frames
	diff      error // the first difference from exp
	expected  int   // frames read from exp
	frames    int
	forwarded int
	err       error // reading or writing failed (not the switch)
}

type outcomeKey struct {
	action  uint32
	verdict switching.Verdict
	reason  switching.Reason
}

var xdpActions = map[uint32]string{switching.XDPRedirect: "redirect", switching.XDPDrop: "drop", switching.XDPPass: "pass"}

// run reads every frame of the capture, switches it with step and handles
// the outcome.
func (rp *replayer) run(step func(switching.ReplayFrame) (switching.Outcome, error)) error {
	rp.err = rp.loop(step)
	return rp.err
}

func (rp *replayer) loop(step func(switching.ReplayFrame) (switching.Outcome, error)) error {
	for {
		data, ci, err := rp.in.ZeroCopyReadPacketData()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", rp.path, err)
		}
		rp.frames++
		// Each frame arrives on the port of the endpoint with its source MAC.
		f := switching.ReplayFrame{Port: rp.def, Data: data}
		if len(data) >= 12 {
			if p, ok := rp.byMAC[[6]byte(data[6:12])]; ok {
				f.Port = p
			}
		}
		o, err := step(f)
		if err != nil {
			return fmt.Errorf("frame %d: %w", rp.frames, err)
		}
		rp.actions[outcomeKey{o.Action, o.Verdict, o.Reason}]++
		if o.Frame == nil {
			continue
		}
		rp.forwarded++
		if rp.out != nil {
			ci.CaptureLength, ci.Length = len(o.Frame), len(o.Frame)
			if err := rp.out.WritePacket(ci, o.Frame); err != nil {
				return err
			}
		}
		if err := rp.compare(o.Frame); err != nil {
			return err
		}
	}
}

// compare checks forwarded frame number rp.forwarded against the next
// expected one, until the first difference.
func (rp *replayer) compare(got []byte) error {
	if rp.exp == nil || rp.diff != nil || rp.expDone {
		return nil
	}
	want, _, err := rp.exp.ZeroCopyReadPacketData()
	if errors.Is(err, io.EOF) {
		rp.expDone = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", rp.expPath, err)
	}
	rp.expected++
	if !bytes.Equal(got, want) {
		at := 0
		for at < min(len(got), len(want)) && got[at] == want[at] {
			at++
		}
		rp.diff = fmt.Errorf("forwarded frame %d differs at byte %d (%d vs %d bytes)", rp.forwarded, at, len(got), len(want))
	}
	return nil
}

// finishExpect counts the expected frames left once the capture is done:
// equal frames so far but not as many is a difference too.
func (rp *replayer) finishExpect() error {
	if rp.exp == nil || rp.diff != nil {
		return nil
	}
	for !rp.expDone {
		_, _, err := rp.exp.ZeroCopyReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", rp.expPath, err)
		}
		rp.expected++
	}
	if rp.forwarded != rp.expected {
		rp.diff = fmt.Errorf("%d frames forwarded, %d expected", rp.forwarded, rp.expected)
	}
	return nil
}
