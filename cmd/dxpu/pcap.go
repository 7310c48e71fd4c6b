package main

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

//go:generate go run . pcap testdata --dir ../../testdata/pcap

var pcapCmd = &cobra.Command{
	Use:   "pcap",
	Short: "Convert TLP captures between encapsulations, generate synthetic TLP traffic, summarise captures",
	Long: `Captures are pcap (microsecond or nanosecond) or pcapng, read with the format
detected, holding Ethernet frames that carry TLPs as NetTLP (UDP, ports
0x3000+tag), dxpu over Ethernet (EtherType 0x88B5) or dxpu over UDP/IPv4
(port 8855), with or without 802.1Q tags.`,
}

// pcapOutFlags are the output options shared by the subcommands.
type pcapOutFlags struct {
	pcapng bool
	nanos  bool
}

func (o *pcapOutFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&o.pcapng, "pcapng", false, "write pcapng instead of pcap")
	cmd.Flags().BoolVar(&o.nanos, "nanos", false, "nanosecond timestamps (default: microseconds; for convert, the input's resolution)")
}

func pcapUsage(format string, a ...any) error {
	return exitCodeError{2, fmt.Errorf(format, a...)}
}

// --- generate ---------------------------------------------------------------

var pcapGen struct {
	out      string
	kind     string
	encap    string
	vlan     int
	count    int
	seed     uint64
	pairs    int
	maxTLPs  int
	maxDW    int
	mtu      int
	control  int
	snaplen  int
	outFlags pcapOutFlags
}

var pcapGenerateCmd = &cobra.Command{
	Use:   "generate --out FILE",
	Short: "Write synthetic TLP traffic (valid TLPs of every kind) to a capture",
	Long: `Generate writes --count frames of synthetic traffic between --pairs host-GPU
pairs: random TLPs that obey the PCIe rules that 'dxpu tlp decode' checks,
with 10-bit tags, 32- and 64-bit addresses, ECRC digests and poisoned TLPs
now and then. dxpu frames carry 1..--max-tlps TLPs up to --mtu, running
sequence numbers per pair and direction, acknowledgements and credit
limits; --control percent of them are ACK, NAK or CREDIT messages. The same
--seed gives the same bytes.

--kind: mix (every kind, memory traffic weighted), mem, or names (MRd,CplD).
--encap: nettlp, dxpu-eth, dxpu-udp, or mix (frames cycle through dxpu-eth,
dxpu-eth with --vlan, dxpu-udp and nettlp). --vlan N tags frames with VLAN N
(-1: untagged; with mix, only the second dxpu-eth flavour).`,
	Args: cobra.NoArgs,
	RunE: runPcapGenerate,
}

func pcapEncaps(name string, vlan int) ([]pcapGenEncap, error) {
	if name == "mix" {
		v := vlan
		if v < 0 {
			v = 100
		}
		return []pcapGenEncap{{encap.EncapDxpuEth, -1}, {encap.EncapDxpuEth, v}, {encap.EncapDxpuUDP, -1}, {encap.EncapNetTLP, -1}}, nil
	}
	e, err := encap.ParseEncap(name)
	if err != nil {
		return nil, err
	}
	return []pcapGenEncap{{e, vlan}}, nil
}

func runPcapGenerate(cmd *cobra.Command, args []string) error {
	g := &pcapGen
	if g.out == "" {
		return pcapUsage("generate: --out is required")
	}
	kinds, err := pcapParseKinds(g.kind)
	if err != nil {
		return pcapUsage("generate: --kind: %v", err)
	}
	encs, err := pcapEncaps(g.encap, g.vlan)
	if err != nil {
		return pcapUsage("generate: --encap: %v", err)
	}
	o := pcapGenOptions{Kinds: kinds, Encaps: encs, Count: g.count, Seed: g.seed, Pairs: g.pairs,
		MaxTLPs: g.maxTLPs, MaxDW: g.maxDW, MTU: g.mtu, Control: g.control, Snaplen: g.snaplen}
	if err := o.check(); err != nil {
		return pcapUsage("generate: %v", err)
	}
	stats, err := pcapGenerateFile(g.out, o, pcapio.WriterOptions{PcapNG: g.outFlags.pcapng, Nanos: g.outFlags.nanos})
	if err != nil {
		return exitCodeError{2, err}
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", g.out, pcapStatsLine(stats))
	return nil
}

func (o *pcapGenOptions) check() error {
	switch {
	case o.Count < 0:
		return fmt.Errorf("--count %d is negative", o.Count)
	case o.Pairs < 1 || o.Pairs > 0xffff:
		return fmt.Errorf("--pairs %d: want 1..65535", o.Pairs)
	case o.MaxTLPs < 1 || o.MaxTLPs > encap.MaxTLPs:
		return fmt.Errorf("--max-tlps %d: want 1..%d", o.MaxTLPs, encap.MaxTLPs)
	case o.MaxDW < 1 || o.MaxDW > 1024:
		return fmt.Errorf("--max-dw %d: want 1..1024", o.MaxDW)
	case o.Control < 0 || o.Control > 100:
		return fmt.Errorf("--control %d: want a percentage", o.Control)
	case o.Snaplen < 0:
		return fmt.Errorf("--snaplen %d is negative", o.Snaplen)
	}
	// The largest TLP (4DW header, data, ECRC) must fit a frame.
	if need := encap.HeaderLen + 2 + encap.IPv4HeaderLen + encap.UDPHeaderLen + 16 + 4*o.MaxDW + 4; o.MTU < need {
		return fmt.Errorf("--mtu %d cannot carry a TLP of %d DWs: need at least %d", o.MTU, o.MaxDW, need)
	}
	for _, e := range o.Encaps {
		if e.VLAN > 4094 {
			return fmt.Errorf("--vlan %d: want 1..4094 (or -1 for none)", e.VLAN)
		}
	}
	return nil
}

func pcapGenerateFile(path string, o pcapGenOptions, wo pcapio.WriterOptions) (map[string]int, error) {
	if o.Snaplen > 0 {
		wo.Snaplen = uint32(o.Snaplen)
	}
	w, err := pcapio.Create(path, wo)
	if err != nil {
		return nil, err
	}
	stats, err := pcapGenerate(w, o)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return stats, nil
}

func pcapStatsLine(stats map[string]int) string {
	keys := make([]string, 0, len(stats))
	for k := range stats {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, stats[k])
	}
	return strings.Join(parts, " ")
}

// --- convert ----------------------------------------------------------------

var pcapConv struct {
	in, out  string
	to       string
	vlan     int
	pair     uint32
	udpPort  uint16
	srcIP    string
	dstIP    string
	pack     bool
	mtu      int
	outFlags pcapOutFlags
}

var pcapConvertCmd = &cobra.Command{
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
endpoints into dxpu frames of up to --mtu bytes, as a bridge sends them;
each packed frame takes the timestamp of its first TLP.

TLPs that the capture's snap length cut short stay cut: the output frame is
built with the TLP's declared length and its record keeps only the bytes
the input had (the original length says how long the frame was). Frames
without TLPs are skipped. Frames that do not parse are reported on stderr
with their number; exit status 1 if any, 2 for usage or I/O errors.`,
	Args: cobra.NoArgs,
	RunE: runPcapConvert,
}

func runPcapConvert(cmd *cobra.Command, args []string) error {
	c := &pcapConv
	if c.in == "" || c.out == "" || c.to == "" {
		return pcapUsage("convert: --in, --out and --to are required")
	}
	to, err := encap.ParseEncap(c.to)
	if err != nil {
		return pcapUsage("convert: --to: %v", err)
	}
	if c.vlan < -1 || c.vlan > 4094 {
		return pcapUsage("convert: --vlan %d: want -1, 0 or 1..4094", c.vlan)
	}
	if c.pair > 0xffffff {
		return pcapUsage("convert: --pair %d does not fit 24 bits", c.pair)
	}
	src, err1 := netip.ParseAddr(c.srcIP)
	dst, err2 := netip.ParseAddr(c.dstIP)
	if err1 != nil || err2 != nil || !src.Is4() || !dst.Is4() {
		return pcapUsage("convert: --src-ip %q and --dst-ip %q must be IPv4 addresses", c.srcIP, c.dstIP)
	}
	r, err := pcapio.Open(c.in)
	if err != nil {
		return exitCodeError{2, err}
	}
	defer r.Close()
	if r.LinkType() != layers.LinkTypeEthernet {
		return exitCodeError{2, fmt.Errorf("%s: link type %v, only Ethernet captures hold TLP frames", c.in, r.LinkType())}
	}
	nanos := c.outFlags.nanos
	if !cmd.Flags().Changed("nanos") {
		nanos = r.Nanos()
	}
	w, err := pcapio.Create(c.out, pcapio.WriterOptions{PcapNG: c.outFlags.pcapng, Nanos: nanos})
	if err != nil {
		return exitCodeError{2, err}
	}
	if c.pack && to == encap.EncapNetTLP {
		return pcapUsage("convert: --pack needs a dxpu --to")
	}
	if c.mtu < 128 || c.mtu > 65535 {
		return pcapUsage("convert: --mtu %d: want 128..65535", c.mtu)
	}
	cv := &pcapConverter{to: to, vlan: c.vlan, pair: c.pair, cfg: encap.Config{UDPPort: c.udpPort}, src: src, dst: dst, w: w,
		seq: map[[12]byte]uint32{}, pack: c.pack}
	cv.packer.MTU = c.mtu
	bad, err := cv.run(r, cmd.ErrOrStderr())
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return exitCodeError{2, err}
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s: %d frames read, %d written, %d TLPs (%d truncated), %d frames without TLPs skipped, %d bad\n",
		c.out, cv.read, cv.written, cv.tlps, cv.truncated, cv.skipped, bad)
	if bad > 0 {
		return exitCodeError{1, fmt.Errorf("%d frames of %s did not parse", bad, c.in)}
	}
	return nil
}

type pcapConverter struct {
	to       encap.Encap
	vlan     int
	pair     uint32
	cfg      encap.Config
	src, dst netip.Addr
	w        *pcapio.Writer
	seq      map[[12]byte]uint32 // next dxpu sequence number per MAC pair
	nseq     uint16

	read, written, tlps, truncated, skipped int
	frame, tlpBuf                           []byte

	// --pack: TLPs gathered for the next frame, all between the same ends.
	pack    bool
	packer  encap.Packer
	packKey string
	packTS  gopacket.CaptureInfo
	packSeq uint32
}

func (c *pcapConverter) run(r *pcapio.Reader, stderr io.Writer) (bad int, err error) {
	for {
		data, ci, err := r.Next()
		if errors.Is(err, io.EOF) {
			return bad, c.flushPack()
		}
		if err != nil {
			return bad, err
		}
		c.read++
		f, err := encap.ParseFrame(data, &c.cfg)
		if err != nil {
			fmt.Fprintf(stderr, "frame %d: %v\n", c.read, err)
			bad++
			continue
		}
		if f.NumTLPs() == 0 {
			if h := f.Header(); h != nil && c.to != encap.EncapNetTLP && !f.Truncated() {
				// ACK, NAK, CREDIT and CONTROL messages carry over between dxpu flavours.
				if err := c.convertMsg(&f, ci); err != nil {
					fmt.Fprintf(stderr, "frame %d: %v\n", c.read, err)
					bad++
				}
				continue
			}
			c.skipped++
			continue
		}
		if err := c.convert(&f, ci); err != nil {
			fmt.Fprintf(stderr, "frame %d: %v\n", c.read, err)
			bad++
		}
	}
}

func (c *pcapConverter) convertMsg(f *encap.Frame, ci gopacket.CaptureInfo) error {
	l2 := c.l2(f)
	fields := f.Header().Fields()
	var l3 *encap.L3
	if c.to == encap.EncapDxpuUDP {
		l3 = c.l3(f, c.cfg.UDPPort)
	}
	var err error
	c.frame, err = encap.AppendDxpuMsg(c.frame[:0], &l2, l3, &fields, f.Body())
	if err != nil {
		return err
	}
	return c.write(ci, c.frame, len(c.frame))
}

// wholeTLP returns the TLP with missing bytes (cut by the capture) filled
// with zeros up to its declared length, and how many bytes were present.
func (c *pcapConverter) wholeTLP(b []byte, truncated bool) ([]byte, int, error) {
	if !truncated {
		return b, len(b), nil
	}
	if len(b) < 4 {
		return nil, 0, fmt.Errorf("TLP cut to %d bytes: too short to know its length", len(b))
	}
	n := tlp.View(b).WireLen()
	if len(b) < tlp.View(b).HeaderLen() {
		n = max(n, tlp.View(b).HeaderLen())
	}
	c.tlpBuf = append(append(c.tlpBuf[:0], b...), make([]byte, n-len(b))...)
	return c.tlpBuf, len(b), nil
}

func (c *pcapConverter) l2(f *encap.Frame) encap.L2 {
	var l2 encap.L2
	copy(l2.Dst[:], f.DstMAC())
	copy(l2.Src[:], f.SrcMAC())
	switch {
	case c.vlan > 0:
		l2.Tagged, l2.VLAN = true, uint16(c.vlan)
	case c.vlan == -1 && f.NumVLANs() > 0:
		_, tci := f.VLANTag(0)
		l2.Tagged, l2.VLAN, l2.PCP = true, tci&0xfff, uint8(tci>>13)
	}
	return l2
}

func (c *pcapConverter) l3(f *encap.Frame, dstPort uint16) *encap.L3 {
	l3 := &encap.L3{Src: c.src, Dst: c.dst, DstPort: dstPort}
	if f.HasIPv4() {
		l3.Src, l3.Dst = f.SrcIP(), f.DstIP()
	}
	return l3
}

func (c *pcapConverter) write(ci gopacket.CaptureInfo, frame []byte, keep int) error {
	data := frame
	if keep < len(frame) {
		data = frame[:keep]
	}
	c.written++
	return c.w.WritePacket(gopacket.CaptureInfo{Timestamp: ci.Timestamp, CaptureLength: len(data), Length: len(frame)}, data)
}

func (c *pcapConverter) convert(f *encap.Frame, ci gopacket.CaptureInfo) error {
	l2 := c.l2(f)
	n := f.NumTLPs()
	if c.to == encap.EncapNetTLP {
		for i := 0; i < n; i++ {
			b, tr := f.TLP(i)
			if tr && len(b) == 0 {
				break // the capture ends before this TLP
			}
			whole, have, err := c.wholeTLP(b, tr)
			if err != nil {
				return fmt.Errorf("TLP %d: %w", i, err)
			}
			seq, ts := c.nseq, uint32(ci.Timestamp.UnixNano())
			if f.Encap() == encap.EncapNetTLP {
				seq, ts = f.NetTLPSeq(), f.NetTLPTimestamp()
			}
			c.nseq++
			c.frame, err = encap.AppendNetTLP(c.frame[:0], &l2, c.l3(f, 0), seq, ts, whole)
			if err != nil {
				return err
			}
			c.tlps++
			keep := len(c.frame)
			if tr {
				c.truncated++
				keep = contentEnd(c.frame, &c.cfg) - (len(whole) - have)
			}
			if err := c.write(ci, c.frame, keep); err != nil {
				return err
			}
		}
		return nil
	}
	if c.pack && f.Encap() == encap.EncapNetTLP && !f.Truncated() {
		return c.addPack(f, ci, l2)
	}
	if err := c.flushPack(); err != nil {
		return err
	}
	// To dxpu: one frame with the same TLPs.
	var fields encap.Fields
	if h := f.Header(); h != nil {
		fields = h.Fields()
	} else {
		var key [12]byte
		copy(key[:6], l2.Src[:])
		copy(key[6:], l2.Dst[:])
		fields = encap.Fields{Type: encap.MsgTLP, PairID: c.pair, Seq: c.seq[key]}
		c.seq[key] += uint32(n)
	}
	tlps := make([][]byte, 0, n)
	missing := 0
	for i := 0; i < n; i++ {
		b, tr := f.TLP(i)
		if tr && len(b) == 0 {
			break
		}
		whole, have, err := c.wholeTLP(b, tr)
		if err != nil {
			return fmt.Errorf("TLP %d: %w", i, err)
		}
		if tr {
			c.truncated++
			missing = len(whole) - have
			whole = append([]byte(nil), whole...)
		}
		tlps = append(tlps, whole)
	}
	var err error
	if c.to == encap.EncapDxpuEth {
		c.frame, err = encap.AppendDxpuEth(c.frame[:0], &l2, &fields, tlps)
	} else {
		c.frame, err = encap.AppendDxpuUDP(c.frame[:0], &l2, c.l3(f, c.cfg.UDPPort), &fields, tlps)
	}
	if err != nil {
		return err
	}
	c.tlps += len(tlps)
	keep := len(c.frame)
	if missing > 0 {
		keep = contentEnd(c.frame, &c.cfg) - missing
	}
	return c.write(ci, c.frame, keep)
}

// addPack adds the TLP of a whole NetTLP frame to the frame being packed,
// sending that first if the TLP goes elsewhere or does not fit.
func (c *pcapConverter) addPack(f *encap.Frame, ci gopacket.CaptureInfo, l2 encap.L2) error {
	b, _ := f.TLP(0)
	var l3 *encap.L3
	if c.to == encap.EncapDxpuUDP {
		l3 = c.l3(f, c.cfg.UDPPort)
	}
	key := fmt.Sprint(l2, l3)
	if c.packer.Len() > 0 && (key != c.packKey || !c.packer.Fits(len(b))) {
		if err := c.flushPack(); err != nil {
			return err
		}
	}
	if c.packer.Len() == 0 {
		c.packer.L2, c.packer.L3, c.packKey, c.packTS = l2, l3, key, ci
		var k [12]byte
		copy(k[:6], l2.Src[:])
		copy(k[6:], l2.Dst[:])
		c.packSeq = c.seq[k]
	}
	// The packer keeps a reference until the frame is built: give it a copy
	// that the reader's next frame cannot overwrite.
	if !c.packer.Add(append([]byte(nil), b...)) {
		return fmt.Errorf("TLP of %d bytes does not fit a %d-byte MTU", len(b), c.packer.MTU)
	}
	var k [12]byte
	copy(k[:6], l2.Src[:])
	copy(k[6:], l2.Dst[:])
	c.seq[k]++
	c.tlps++
	return nil
}

// flushPack writes the packed frame, if any.
func (c *pcapConverter) flushPack() error {
	if c.packer.Len() == 0 {
		return nil
	}
	frame, err := c.packer.Frame(&encap.Fields{Type: encap.MsgTLP, PairID: c.pair, Seq: c.packSeq})
	c.packer.Reset()
	if err != nil {
		return err
	}
	return c.write(c.packTS, frame, len(frame))
}

// contentEnd returns the offset just past the TLPs of a frame we built
// (the bytes after it are padding).
func contentEnd(frame []byte, cfg *encap.Config) int {
	f, err := encap.ParseFrame(frame, cfg)
	if err != nil {
		return len(frame)
	}
	return f.End()
}

// --- info -------------------------------------------------------------------

var pcapInfoUDPPort uint16

var pcapInfoCmd = &cobra.Command{
	Use:   "info FILE...",
	Short: "Count frames per encapsulation, TLPs per kind, truncated and bad frames",
	Long: `Info prints, for each capture, the number of frames per encapsulation,
VLAN-tagged frames, dxpu messages without TLPs, TLPs per kind (from their
Fmt and Type only: 'dxpu tlp decode --pcap' validates them), TLPs cut by the
snap length, and frames that do not parse, each reported on stderr with its
number. Exit status 1 if any frame did not parse, 2 for I/O errors.`,
	Args: cobra.MinimumNArgs(1),
	RunE: func(cmd *cobra.Command, args []string) error {
		bad := 0
		for _, path := range args {
			s, err := pcapInfo(path, &encap.Config{UDPPort: pcapInfoUDPPort}, cmd.ErrOrStderr())
			if err != nil {
				return exitCodeError{2, err}
			}
			bad += s["bad"]
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", path, pcapStatsLine(s))
		}
		if bad > 0 {
			return exitCodeError{1, fmt.Errorf("%d frames did not parse", bad)}
		}
		return nil
	},
}

// pcapInfo counts what a capture holds; frames that do not parse are
// reported on errs (when not nil) with their 1-based number.
func pcapInfo(path string, cfg *encap.Config, errs io.Writer) (map[string]int, error) {
	r, err := pcapio.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if r.LinkType() != layers.LinkTypeEthernet {
		return nil, fmt.Errorf("%s: link type %v, only Ethernet captures hold TLP frames", path, r.LinkType())
	}
	s := map[string]int{}
	for {
		data, _, err := r.ZeroCopyReadPacketData()
		if errors.Is(err, io.EOF) {
			return s, nil
		}
		if err != nil {
			return nil, err
		}
		s["frames"]++
		f, err := encap.ParseFrame(data, cfg)
		if err != nil {
			s["bad"]++
			if errs != nil {
				fmt.Fprintf(errs, "%s frame %d: %v\n", path, s["frames"], err)
			}
			continue
		}
		s["encap:"+f.Encap().String()]++
		if f.NumVLANs() > 0 {
			s["vlan-tagged"]++
		}
		if h := f.Header(); h != nil && h.Type() != encap.MsgTLP {
			s["msg:"+h.Type().String()]++
		}
		for i := 0; i < f.NumTLPs(); i++ {
			b, tr := f.TLP(i)
			if tr {
				s["truncated"]++
			}
			if len(b) >= 4 {
				s["kind:"+tlp.View(b).Kind().String()]++
			}
		}
	}
}

// --- testdata ---------------------------------------------------------------

// pcapCorpus is the replay corpus in testdata/pcap: what `dxpu pcap
// testdata` writes. Change it and regenerate with `go generate ./cmd/dxpu`.
var pcapCorpus = []struct {
	name string
	desc string
	o    pcapGenOptions
	wo   pcapio.WriterOptions
}{
	{"dxpu-eth.pcap", "dxpu over raw Ethernet, untagged, every TLP kind, 4 pairs, ACK/NAK/CREDIT messages",
		pcapGenOptions{Encaps: []pcapGenEncap{{encap.EncapDxpuEth, -1}}, Count: 64, Seed: 1, Pairs: 4}, pcapio.WriterOptions{}},
	{"dxpu-eth-vlan.pcap", "dxpu over raw Ethernet with an 802.1Q tag (VLAN 100), 4 pairs",
		pcapGenOptions{Encaps: []pcapGenEncap{{encap.EncapDxpuEth, 100}}, Count: 64, Seed: 2, Pairs: 4}, pcapio.WriterOptions{}},
	{"dxpu-udp.pcap", "dxpu over IPv4/UDP port 8855, nanosecond timestamps, 6 pairs",
		pcapGenOptions{Encaps: []pcapGenEncap{{encap.EncapDxpuUDP, -1}}, Count: 64, Seed: 3, Pairs: 6}, pcapio.WriterOptions{Nanos: true}},
	{"dxpu-udp-vlan.pcapng", "dxpu over IPv4/UDP with VLAN 200, pcapng",
		pcapGenOptions{Encaps: []pcapGenEncap{{encap.EncapDxpuUDP, 200}}, Count: 32, Seed: 4, Pairs: 3}, pcapio.WriterOptions{PcapNG: true, Nanos: true}},
	{"nettlp.pcap", "NetTLP (UDP ports 0x3000+tag), one TLP per frame, every kind, nanosecond timestamps",
		pcapGenOptions{Encaps: []pcapGenEncap{{encap.EncapNetTLP, -1}}, Count: 64, Seed: 5, Pairs: 2}, pcapio.WriterOptions{Nanos: true}},
	{"nettlp-vlan-snap128.pcap", "NetTLP with VLAN 100 cut at 128 bytes like the NetTLP hardware captures",
		pcapGenOptions{Encaps: []pcapGenEncap{{encap.EncapNetTLP, 100}}, Count: 48, Seed: 6, Pairs: 2, Snaplen: 128}, pcapio.WriterOptions{Nanos: true}},
	{"mix.pcap", "all four encapsulations interleaved (dxpu-eth, dxpu-eth VLAN 100, dxpu-udp, NetTLP), 8 pairs",
		pcapGenOptions{Count: 96, Seed: 7, Pairs: 8}, pcapio.WriterOptions{}},
	{"mem-jumbo.pcap", "memory traffic only (MRd, MWr, Cpl, CplD) with payloads up to 1 KiB, MTU 9000, many TLPs per frame",
		pcapGenOptions{Encaps: []pcapGenEncap{{encap.EncapDxpuEth, -1}}, Count: 12, Seed: 8, Pairs: 2, MaxTLPs: 24, MaxDW: 256, MTU: 9000}, pcapio.WriterOptions{}},
}

var pcapTestdata struct {
	dir   string
	check bool
}

var pcapTestdataCmd = &cobra.Command{
	Use:   "testdata --dir DIR",
	Short: "Regenerate the replay corpus of testdata/pcap (deterministic)",
	Long: `Testdata writes the synthetic captures of testdata/pcap and their README.md
into --dir. The output depends only on this program, so regenerating gives
identical bytes; --check compares instead of writing and exits 1 on any
difference.`,
	Args: cobra.NoArgs,
	RunE: func(cmd *cobra.Command, args []string) error {
		if pcapTestdata.dir == "" {
			return pcapUsage("testdata: --dir is required")
		}
		dir := pcapTestdata.dir
		if pcapTestdata.check {
			tmp, err := os.MkdirTemp("", "dxpu-pcap-testdata")
			if err != nil {
				return exitCodeError{2, err}
			}
			defer os.RemoveAll(tmp)
			dir = tmp
		} else if err := os.MkdirAll(dir, 0o755); err != nil {
			return exitCodeError{2, err}
		}
		if err := pcapWriteCorpus(dir); err != nil {
			return exitCodeError{2, err}
		}
		if !pcapTestdata.check {
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %d captures and README.md to %s\n", len(pcapCorpus), dir)
			return nil
		}
		diff, err := pcapCompareDirs(dir, pcapTestdata.dir)
		if err != nil {
			return exitCodeError{2, err}
		}
		if len(diff) > 0 {
			return exitCodeError{1, fmt.Errorf("%s is stale (%s): run go generate ./cmd/dxpu", pcapTestdata.dir, strings.Join(diff, ", "))}
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s is up to date\n", pcapTestdata.dir)
		return nil
	},
}

// pcapCorpusFiles lists the files pcapWriteCorpus makes.
func pcapCorpusFiles() []string {
	names := []string{"README.md"}
	for _, c := range pcapCorpus {
		names = append(names, c.name)
	}
	return names
}

func pcapWriteCorpus(dir string) error {
	var readme strings.Builder
	readme.WriteString("# Synthetic TLP captures (generated: do not edit)\n\n" +
		"Written by `dxpu pcap testdata --dir testdata/pcap` (`go generate ./cmd/dxpu`);\n" +
		"`dxpu pcap testdata --dir testdata/pcap --check` verifies them. Every TLP obeys the\n" +
		"PCIe rules that `dxpu tlp decode` checks. Pair IDs, MACs (02:d7:<pair id>:<side>),\n" +
		"IPv4 addresses (10.0.<pair>.<side>) and timestamps (from 2026-01-01T00:00:00Z) are\n" +
		"deterministic. This is the XDP replay corpus.\n\n" +
		"| file | frames | contents |\n|---|---|---|\n")
	for _, c := range pcapCorpus {
		o := c.o
		if o.Kinds == nil {
			o.Kinds, _ = pcapParseKinds("mix")
			if strings.HasPrefix(c.name, "mem") {
				o.Kinds, _ = pcapParseKinds("mem")
			}
		}
		if o.Encaps == nil {
			o.Encaps, _ = pcapEncaps("mix", 100)
		}
		if o.MaxTLPs == 0 {
			o.MaxTLPs = 8
		}
		if o.MaxDW == 0 {
			o.MaxDW = 32
		}
		if o.MTU == 0 {
			o.MTU = 1500
		}
		if o.Control == 0 {
			o.Control = 10
		}
		if err := o.check(); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		stats, err := pcapGenerateFile(filepath.Join(dir, c.name), o, c.wo)
		if err != nil {
			return err
		}
		fmt.Fprintf(&readme, "| %s | %d | %s; %s |\n", c.name, o.Count, c.desc, pcapStatsLine(stats))
	}
	return os.WriteFile(filepath.Join(dir, "README.md"), []byte(readme.String()), 0o644)
}

// pcapCompareDirs returns the corpus files that differ between a and b.
func pcapCompareDirs(a, b string) ([]string, error) {
	var diff []string
	for _, name := range pcapCorpusFiles() {
		x, err := os.ReadFile(filepath.Join(a, name))
		if err != nil {
			return nil, err
		}
		y, err := os.ReadFile(filepath.Join(b, name))
		if err != nil || string(x) != string(y) {
			diff = append(diff, name)
		}
	}
	return diff, nil
}

func init() {
	f := pcapGenerateCmd.Flags()
	f.StringVar(&pcapGen.out, "out", "", "output capture")
	f.StringVar(&pcapGen.kind, "kind", "mix", "TLP kinds: mix, mem, or a list such as MRd,MWr,CplD")
	f.StringVar(&pcapGen.encap, "encap", "mix", "nettlp, dxpu-eth, dxpu-udp or mix")
	f.IntVar(&pcapGen.vlan, "vlan", -1, "802.1Q VLAN ID for tagged frames (-1: untagged)")
	f.IntVar(&pcapGen.count, "count", 100, "number of frames")
	f.Uint64Var(&pcapGen.seed, "seed", 1, "random seed (same seed, same bytes)")
	f.IntVar(&pcapGen.pairs, "pairs", 4, "number of host-GPU pairs (pair IDs)")
	f.IntVar(&pcapGen.maxTLPs, "max-tlps", 8, "most TLPs per dxpu frame")
	f.IntVar(&pcapGen.maxDW, "max-dw", 32, "longest TLP payload or read, in DWs")
	f.IntVar(&pcapGen.mtu, "mtu", 1500, "largest Ethernet payload of a dxpu frame")
	f.IntVar(&pcapGen.control, "control", 10, "percent of dxpu frames that are ACK/NAK/CREDIT messages")
	f.IntVar(&pcapGen.snaplen, "snaplen", 0, "cut records to this many bytes, like a capture's snap length (0: whole)")
	pcapGen.outFlags.add(pcapGenerateCmd)

	f = pcapConvertCmd.Flags()
	f.StringVar(&pcapConv.in, "in", "", "input capture (pcap or pcapng)")
	f.StringVar(&pcapConv.out, "out", "", "output capture")
	f.StringVar(&pcapConv.to, "to", "", "nettlp, dxpu-eth or dxpu-udp")
	f.IntVar(&pcapConv.vlan, "vlan", -1, "-1 keep the input's tag, 0 untagged, 1..4094 tag with this VLAN")
	f.Uint32Var(&pcapConv.pair, "pair", 1, "dxpu pair ID for TLPs that come from NetTLP frames")
	f.Uint16Var(&pcapConv.udpPort, "udp-port", encap.DefaultUDPPort, "dxpu UDP port (reading and writing)")
	f.StringVar(&pcapConv.srcIP, "src-ip", "10.0.0.1", "IPv4 source where the input has no IPv4")
	f.StringVar(&pcapConv.dstIP, "dst-ip", "10.0.0.2", "IPv4 destination where the input has no IPv4")
	f.BoolVar(&pcapConv.pack, "pack", false, "pack consecutive NetTLP TLPs between the same ends into dxpu frames")
	f.IntVar(&pcapConv.mtu, "mtu", encap.DefaultMTU, "largest Ethernet payload of a packed dxpu frame")
	pcapConv.outFlags.add(pcapConvertCmd)

	pcapInfoCmd.Flags().Uint16Var(&pcapInfoUDPPort, "udp-port", encap.DefaultUDPPort, "dxpu UDP port")

	pcapTestdataCmd.Flags().StringVar(&pcapTestdata.dir, "dir", "", "directory of the corpus (testdata/pcap)")
	pcapTestdataCmd.Flags().BoolVar(&pcapTestdata.check, "check", false, "compare with --dir instead of writing")

	pcapCmd.AddCommand(pcapGenerateCmd, pcapConvertCmd, pcapInfoCmd, pcapTestdataCmd)
	rootCmd.AddCommand(pcapCmd)
}
