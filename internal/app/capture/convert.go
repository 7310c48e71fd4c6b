package capture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"

	"github.com/google/gopacket"

	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// ConvertOptions are `dxpu pcap convert`'s.
type ConvertOptions struct {
	In, Out string
	To      string // nettlp, dxpu-eth or dxpu-udp
	VLAN    int    // -1 keep the input's outer tag, 0 untagged, 1..4094 set
	Pair    uint32 // dxpu pair of TLPs that come from NetTLP frames
	UDPPort uint16 // dxpu UDP port, reading and writing
	// SrcIP and DstIP address frames whose input has no IPv4 header.
	SrcIP, DstIP string
	Pack         bool // gather consecutive NetTLP TLPs into dxpu frames
	MTU          int  // of packed frames
	PcapNG       bool
	// Nanos forces the output's timestamp resolution; nil keeps the input's.
	Nanos *bool
}

// Convert re-encapsulates every TLP of o.In into o.Out and prints a summary
// to stdout; frames that do not parse are reported on stderr with their
// number and make the error apperr.ErrFailed. Bad options are
// apperr.ErrUsage; I/O errors are plain. o.Out is replaced only once the
// whole output is written: on an error or when ctx ends it keeps what it
// had.
func Convert(ctx context.Context, o ConvertOptions, stdout, stderr io.Writer) error {
	if o.In == "" || o.Out == "" || o.To == "" {
		return apperr.Usage(fmt.Errorf("convert: --in, --out and --to are required"))
	}
	if err := notStdout("convert", "--out", o.Out); err != nil {
		return err
	}
	to, err := encap.ParseEncap(o.To)
	if err != nil {
		return apperr.Usage(fmt.Errorf("convert: --to: %w", err))
	}
	if o.VLAN < -1 || o.VLAN > 4094 {
		return apperr.Usage(fmt.Errorf("convert: --vlan %d: want -1, 0 or 1..4094", o.VLAN))
	}
	if o.Pair > 0xffffff {
		return apperr.Usage(fmt.Errorf("convert: --pair %d does not fit 24 bits", o.Pair))
	}
	src, err1 := netip.ParseAddr(o.SrcIP)
	dst, err2 := netip.ParseAddr(o.DstIP)
	if err1 != nil || err2 != nil || !src.Is4() || !dst.Is4() {
		return apperr.Usage(fmt.Errorf("convert: --src-ip %q and --dst-ip %q must be IPv4 addresses", o.SrcIP, o.DstIP))
	}
	if o.Pack && to == encap.EncapNetTLP {
		return apperr.Usage(fmt.Errorf("convert: --pack needs a dxpu --to"))
	}
	if o.MTU < 128 || o.MTU > 65535 {
		return apperr.Usage(fmt.Errorf("convert: --ether-mtu %d: want 128..65535", o.MTU))
	}
	if err := sameFile("convert", "--out", o.Out, "--in", o.In); err != nil {
		return err
	}
	r, w, err := openRewrite(o.In, o.Out, o.PcapNG, o.Nanos, false)
	if err != nil {
		return err
	}
	defer r.Close()
	defer w.abort()
	cv := &converter{in: o.In, out: o.Out, to: to, vlan: o.VLAN, pair: o.Pair, cfg: encap.Config{UDPPort: o.UDPPort}, src: src, dst: dst,
		w: w.Writer, seq: map[[12]byte]uint32{}, pack: o.Pack}
	cv.packer.MTU = o.MTU
	errs := &errLines{w: stderr}
	bad, err := cv.run(ctx, r, errs)
	errs.close("frames that did not convert")
	if err == nil {
		err = w.commit()
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d frames read, %d written, %d TLPs (%d truncated), %d frames without TLPs skipped, %d bad\n",
		o.Out, cv.read, cv.written, cv.tlps, cv.truncated, cv.skipped, bad)
	if bad > 0 {
		return apperr.Failed(fmt.Errorf("%d frames of %s did not parse", bad, o.In))
	}
	return nil
}

type converter struct {
	in, out  string // paths, for errors
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

func (c *converter) run(ctx context.Context, r *pcapio.Reader, stderr io.Writer) (bad int, err error) {
	for {
		if err := interrupted(ctx, "convert", c.out, c.read); err != nil {
			return bad, err
		}
		data, ci, err := r.Next()
		if errors.Is(err, io.EOF) {
			return bad, c.flushPack()
		}
		if err != nil {
			return bad, fmt.Errorf("%s: %w", c.in, err)
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

func (c *converter) convertMsg(f *encap.Frame, ci gopacket.CaptureInfo) error {
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
func (c *converter) wholeTLP(b []byte, truncated bool) ([]byte, int, error) {
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
	if n <= len(b) {
		// The capture cut only what follows the TLP (a NetTLP frame's
		// body longer than the TLP it declares): nothing of it is missing.
		return b, len(b), nil
	}
	c.tlpBuf = append(append(c.tlpBuf[:0], b...), make([]byte, n-len(b))...)
	return c.tlpBuf, len(b), nil
}

func (c *converter) l2(f *encap.Frame) encap.L2 {
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

func (c *converter) l3(f *encap.Frame, dstPort uint16) *encap.L3 {
	l3 := &encap.L3{Src: c.src, Dst: c.dst, DstPort: dstPort}
	if f.HasIPv4() {
		l3.Src, l3.Dst = f.SrcIP(), f.DstIP()
	}
	return l3
}

func (c *converter) write(ci gopacket.CaptureInfo, frame []byte, keep int) error {
	data := frame
	if keep < len(frame) {
		data = frame[:keep]
	}
	c.written++
	return c.w.WritePacket(gopacket.CaptureInfo{Timestamp: ci.Timestamp, CaptureLength: len(data), Length: len(frame)}, data)
}

func (c *converter) convert(f *encap.Frame, ci gopacket.CaptureInfo) error {
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
func (c *converter) addPack(f *encap.Frame, ci gopacket.CaptureInfo, l2 encap.L2) error {
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
func (c *converter) flushPack() error {
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
