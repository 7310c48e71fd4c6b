package tlpcodec

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/app/progress"
	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// parseHexLine turns one line of hex into bytes; ok=false for lines to skip.
func parseHexLine(line string) (b []byte, ok bool, err error) {
	s := strings.TrimSpace(line)
	if s == "" || strings.HasPrefix(s, "#") {
		return nil, false, nil
	}
	// Separators become spaces so that each word (a DW as tools print
	// them, "0x0100050f") may carry its own 0x prefix.
	s = strings.Map(func(r rune) rune {
		switch r {
		case '\t', ':', '_', '-', ',':
			return ' '
		}
		return r
	}, s)
	var sb strings.Builder
	for _, w := range strings.Fields(s) {
		sb.WriteString(strings.TrimPrefix(strings.TrimPrefix(w, "0x"), "0X"))
	}
	b, err = hex.DecodeString(sb.String())
	if err != nil {
		return nil, true, fmt.Errorf("bad hex: %w", err)
	}
	return b, true, nil
}

// MaxErrorLines bounds the error objects Decode prints: a hostile file
// (a small gzip that inflates to gigabytes of broken frames) must not fill a
// disk. Past it, failures are only counted, and one closing object says how
// many were not printed.
const MaxErrorLines = 1000

// decoder writes one JSON line per TLP and counts failures.
type decoder struct {
	w        *bufio.Writer
	buf      []byte
	enc      []byte // the re-encoding, for reserved_bits
	mask     [tlp.Header4DW]byte
	pkt      tlp.Packet
	total    int
	failures int
	bar      *progress.Bar  // frames read, on a terminal
	frames   int            // of a capture
	ports    map[uint16]int // UDP datagrams per port, of a capture's frames without TLPs
	udp      int            // those datagrams
	sealed   int            // sealed dxpu frames of a capture (TLPs encrypted)
	cut      int            // frames of a capture its snap length cut within their headers
	firstCut int            // the first of them (1-based)
}

// quiet reports whether the failure just counted is past MaxErrorLines.
func (d *decoder) quiet() bool { return d.failures > MaxErrorLines }

// emit writes one TLP's object. prefix holds the leading fields (line or
// frame, encap, truncated) without braces.
// A nil prefix on success when onlyOnError: hex lines print "line" only
// with errors.
func (d *decoder) emit(prefix []byte, raw []byte, lenient, onlyOnError bool) {
	d.total++
	var (
		v         tlp.View
		truncated bool
		err       error
	)
	if lenient {
		v, truncated, err = tlp.ParseTruncated(raw)
	} else {
		v, err = tlp.Parse(raw)
	}
	if err == nil {
		err = d.pkt.Decode(v)
	}
	if err == nil && onlyOnError {
		prefix = nil
	}
	b := append(d.buf[:0], '{')
	b = append(b, prefix...)
	if err != nil {
		d.failures++
		if d.quiet() {
			return
		}
		b = appendErrorFields(b, len(prefix) > 0, err)
		b, _ = appendReadable(b, raw)
	} else {
		if len(prefix) > 0 {
			b = append(b, ',')
		}
		if truncated {
			b, _ = tlp.AppendViewJSONFields(b, v)
		} else {
			b = d.pkt.AppendJSONFields(b)
		}
		var m []byte
		if m, d.enc = reservedMask(v, &d.pkt, d.enc, &d.mask); m != nil {
			b = appendReserved(b, m)
		}
	}
	b = append(b, '}', '\n')
	d.buf = b
	d.w.Write(b)
}

func appendErrorFields(b []byte, comma bool, err error) []byte {
	if comma {
		b = append(b, ',')
	}
	b = append(b, `"error":`...)
	b = strconv.AppendQuote(b, err.Error())
	rule := tlp.RuleOf(err)
	if rule == "" {
		rule = "decode"
	}
	b = append(b, `,"rule":`...)
	return strconv.AppendQuote(b, rule)
}

func appendReadable(b []byte, raw []byte) ([]byte, bool) {
	n := len(b)
	b = append(b, ',')
	b, ok := tlp.AppendViewJSONFields(b, tlp.View(raw))
	if !ok {
		return b[:n], false
	}
	return b, true
}

// Options are `dxpu tlp decode`'s.
type Options struct {
	Hex  []string // hex TLPs (the operands)
	Pcap string   // a capture to read instead of hex
	// UDPPort is the capture's dxpu UDP port: a datagram to or from it is
	// dxpu, as `pcap unseal` and `pcap capture` read --udp-port.
	UDPPort uint16
}

// Decode prints one JSON object per TLP to stdout: of the hex TLPs given,
// or of the capture at pcap (dxpu on UDP port 8855), or of the hex lines
// of stdin. TLPs that do not decode print error objects and make the error
// apperr.ErrFailed; giving both hex and a capture is apperr.ErrUsage; I/O
// errors are plain.
func Decode(hexTLPs []string, pcap string, stdin io.Reader, stdout io.Writer) error {
	return DecodeWith(Options{Hex: hexTLPs, Pcap: pcap, UDPPort: encap.DefaultUDPPort}, stdin, stdout, nil)
}

// DecodeWith is Decode with o's options. On stderr (nil: none) it counts
// a capture's frames when stderr is a terminal (package progress: a large
// capture takes a while, and its JSON lines often go to a file), and says
// in one line when a capture held no TLP where it looked, so that an empty
// result is not mistaken for an empty capture.
func DecodeWith(o Options, stdin io.Reader, stdout, stderr io.Writer) error {
	out := bufio.NewWriterSize(stdout, 64<<10)
	d := &decoder{w: out}
	if o.Pcap != "" {
		d.bar = progress.New(stderr, -1, "frames of "+o.Pcap)
		defer d.bar.Finish()
	}
	var err error
	switch {
	case o.Pcap != "" && len(o.Hex) > 0:
		return apperr.Usage(fmt.Errorf("give hex TLPs or --pcap, not both"))
	case o.Pcap != "" && o.UDPPort == 0:
		return apperr.Usage(errors.New("tlp decode: --udp-port 0: want the dxpu UDP port"))
	case o.Pcap != "":
		err = d.decodePcap(o.Pcap, o.UDPPort)
	case len(o.Hex) > 0:
		err = d.decodeLines(strings.NewReader(strings.Join(o.Hex, "\n")))
	default:
		err = d.decodeLines(stdin)
	}
	if d.failures > MaxErrorLines {
		fmt.Fprintf(out, "{\"suppressed_errors\":%d,\"error\":\"only the first %d failures are printed\"}\n", d.failures-MaxErrorLines, MaxErrorLines)
	}
	if ferr := out.Flush(); err == nil && ferr != nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	if d.sealed > 0 {
		return apperr.Failed(fmt.Errorf("tlp decode: %s: %d of %d frames are sealed, their TLPs encrypted: "+
			"unseal the capture first (dxpu pcap unseal --key-log FILE --udp-port %d %s plain.pcap), then decode plain.pcap with the same --udp-port",
			o.Pcap, d.sealed, d.frames, o.UDPPort, o.Pcap))
	}
	if d.cut > 0 && stderr != nil {
		d.bar.Finish()
		fmt.Fprintf(stderr, "dxpu tlp decode: %s: %d of %d frames cut by the capture's snap length within their headers (the first: frame %d): skipped, their TLPs unknown\n",
			o.Pcap, d.cut, d.frames, d.firstCut)
	}
	if o.Pcap != "" && d.total == 0 && d.cut == 0 && stderr != nil {
		d.bar.Finish()
		d.noteNoTLP(stderr, o.Pcap, o.UDPPort)
	}
	if d.failures > 0 {
		return apperr.Failed(fmt.Errorf("tlp decode: %d of %d TLPs did not decode", d.failures, d.total))
	}
	return nil
}

func (d *decoder) decodeLines(r io.Reader) error {
	lr := newLineReader(r, maxDecodeLine)
	var prefix []byte
	for {
		text, tooLong, err := lr.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading stdin: %w", err)
		}
		var b []byte
		ok := true
		if tooLong {
			err = fmt.Errorf("longer than %d bytes: skipped", maxDecodeLine)
		} else {
			b, ok, err = parseHexLine(string(text))
		}
		if !ok {
			continue
		}
		prefix = append(prefix[:0], `"line":`...)
		prefix = strconv.AppendInt(prefix, int64(lr.line), 10)
		if err != nil {
			d.total++
			d.failures++
			if d.quiet() {
				continue
			}
			o := append([]byte{'{'}, prefix...)
			o = append(o, `,"error":`...)
			o = strconv.AppendQuote(o, err.Error())
			o = append(o, `,"rule":"hex"}`+"\n"...)
			d.w.Write(o)
			continue
		}
		d.emit(prefix, b, false, true)
	}
}

// maxDecodeLine bounds a hex line: 1 MiB holds the largest TLP many
// times over.
const maxDecodeLine = 1 << 20

// progressEvery is how many frames a step of the progress counter is:
// the bar takes a lock per step, the loop allocates nothing per frame.
const progressEvery = 4096

// maxPortsCounted bounds the UDP ports decodePcap counts for its hint (a
// capture of random ports must not grow the map without end).
const maxPortsCounted = 4096

// decodePcap decodes the TLPs of a capture: dxpu over Ethernet, over UDP
// to or from port, and NetTLP.
func (d *decoder) decodePcap(path string, port uint16) error {
	r, err := pcapio.OpenEthernet(path)
	if errors.Is(err, pcapio.ErrLinkType) {
		return apperr.Failed(err) // bad input: no TLP frames to decode
	}
	if err != nil {
		return err
	}
	defer r.Close()
	cfg, back := &encap.Config{UDPPort: port}, &encap.Config{}
	var prefix []byte
	for frame := 1; ; frame++ {
		if frame%progressEvery == 0 {
			d.bar.Add(progressEvery)
		}
		data, ci, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: frame %d: %w", path, frame, err)
		}
		d.frames++
		f, ferr := encap.ParseFrame(data, cfg)
		if ferr == nil && f.Encap() == encap.EncapNone {
			// A datagram from the dxpu port is dxpu too (the answers of a
			// bridge whose peer listens on another port).
			if src, dst, ok := udpPorts(data, f.Layers()); ok && src == port && dst != 0 {
				back.UDPPort = dst
				f, ferr = encap.ParseFrame(data, back)
			} else if ok {
				d.countPorts(src, dst)
			}
		}
		if lay := f.Layers(); ferr != nil && (lay.Encap == encap.EncapDxpuEth || lay.Encap == encap.EncapDxpuUDP) &&
			lay.Payload <= len(data) && seal.Sealed(data[lay.Payload:]) {
			// Not a broken frame: its TLPs are encrypted (see Sealed).
			d.sealed++
			continue
		}
		if ferr != nil && encap.CutBySnaplen(ferr, ci.CaptureLength, ci.Length) {
			// Cut, not wrong: counted and said once (as pcap info
			// counts snaplen_cut_frames).
			if d.cut++; d.cut == 1 {
				d.firstCut = frame
			}
			continue
		}
		if ferr != nil {
			d.total++
			d.failures++
			if d.quiet() {
				continue
			}
			o := fmt.Appendf(nil, `{"frame":%d`, frame)
			if f.Encap() != encap.EncapNone {
				o = fmt.Appendf(o, `,"encap":%q`, f.Encap().String())
			}
			o = append(o, `,"error":`...)
			o = strconv.AppendQuote(o, ferr.Error())
			o = append(o, `,"rule":"frame"}`+"\n"...)
			d.w.Write(o)
			continue
		}
		if f.Encap() == encap.EncapNone {
			continue
		}
		for i := 0; i < f.NumTLPs(); i++ {
			b, truncated := f.TLP(i)
			prefix = fmt.Appendf(prefix[:0], `"frame":%d,"encap":%q,"truncated":%t`, frame, f.Encap().String(), truncated)
			d.emit(prefix, b, truncated, false)
		}
	}
}

// udpPorts returns the ports of an IPv4/UDP datagram that walked as no TLP
// carrier; ok is false for any other frame.
func udpPorts(data []byte, lay encap.Layers) (src, dst uint16, ok bool) {
	if lay.Encap != encap.EncapNone || lay.IPv4 == 0 {
		return 0, 0, false
	}
	ip := encap.IPv4(data[lay.IPv4:])
	l4 := lay.IPv4 + ip.HeaderLen()
	if ip.Protocol() != encap.IPProtoUDP || ip.FragmentOffset() != 0 || l4+encap.UDPHeaderLen > len(data) {
		return 0, 0, false
	}
	u := encap.UDP(data[l4:])
	return u.SrcPort(), u.DstPort(), true
}

// countPorts counts a datagram without TLPs under each of its ports.
func (d *decoder) countPorts(src, dst uint16) {
	if d.ports == nil {
		d.ports = map[uint16]int{}
	}
	d.udp++
	for i, p := range [2]uint16{src, dst} {
		if i == 1 && dst == src {
			break
		}
		if _, ok := d.ports[p]; ok || len(d.ports) < maxPortsCounted {
			d.ports[p]++
		}
	}
}

// noteNoTLP says on w that the capture held no TLP where decodePcap
// looked, naming where that was and the flag that looks elsewhere, with
// the capture's most frequent UDP port (the likely dxpu port) if any.
func (d *decoder) noteNoTLP(w io.Writer, path string, port uint16) {
	hint := ""
	best, n := uint16(0), 0
	for p, c := range d.ports {
		if c > n || c == n && p < best {
			best, n = p, c
		}
	}
	if n > 0 {
		hint = fmt.Sprintf(" (the most frequent UDP port here is %d, in %d of %d datagrams)", best, n, d.udp)
	}
	fmt.Fprintf(w, "dxpu tlp decode: %s: %d frames read, none holds a TLP as dxpu (EtherType 0x88B5, or UDP to or from port %d) "+
		"or NetTLP (UDP ports %#x-%#x); --udp-port N reads dxpu on UDP port N%s\n",
		path, d.frames, port, encap.NetTLPPortBase, encap.NetTLPPortMax, hint)
}
