package capture

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// GenerateOptions are `dxpu pcap generate`'s: the traffic as flags spell
// it and where it goes.
type GenerateOptions struct {
	Out     string // output capture (required)
	Kind    string // mix, mem, or kind names such as MRd,CplD
	Encap   string // nettlp, dxpu-eth, dxpu-udp or mix
	VLAN    int    // -1: untagged
	Count   int
	Seed    uint64
	Pairs   int
	MaxTLPs int
	MaxDW   int
	MTU     int
	Control int // percent of dxpu frames that are ACK/NAK/CREDIT messages
	Snaplen int
	PcapNG  bool
	Nanos   bool
}

// Generate writes the synthetic traffic of o to o.Out and prints what it
// wrote to stdout. Bad options are apperr.ErrUsage. o.Out is replaced only
// once the whole capture is written: on an error or when ctx ends it keeps
// what it had.
func Generate(ctx context.Context, o GenerateOptions, stdout io.Writer) error {
	if o.Out == "" {
		return apperr.Usage(fmt.Errorf("generate: --out is required"))
	}
	if err := notStdout("generate", "--out", o.Out); err != nil {
		return err
	}
	kinds, err := ParseKinds(o.Kind)
	if err != nil {
		return apperr.Usage(fmt.Errorf("generate: --kind: %w", err))
	}
	encs, err := Encaps(o.Encap, o.VLAN)
	if err != nil {
		return apperr.Usage(fmt.Errorf("generate: --encap: %w", err))
	}
	t := Traffic{Kinds: kinds, Encaps: encs, Count: o.Count, Seed: o.Seed, Pairs: o.Pairs,
		MaxTLPs: o.MaxTLPs, MaxDW: o.MaxDW, MTU: o.MTU, Control: o.Control, Snaplen: o.Snaplen}
	if err := t.Check(); err != nil {
		return apperr.Usage(fmt.Errorf("generate: %w", err))
	}
	stats, err := WriteTraffic(ctx, o.Out, t, pcapio.WriterOptions{PcapNG: o.PcapNG, Nanos: o.Nanos})
	if err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	fmt.Fprintf(stdout, "%s: %s\n", o.Out, StatsLine(stats))
	return nil
}

// Encaps reads --encap: one encapsulation, or "mix" (dxpu-eth, dxpu-eth
// tagged with vlan or 100, dxpu-udp and NetTLP in turn).
func Encaps(name string, vlan int) ([]FrameEncap, error) {
	if name == "mix" {
		v := vlan
		if v == -1 {
			v = 100
		}
		return []FrameEncap{{encap.EncapDxpuEth, -1}, {encap.EncapDxpuEth, v}, {encap.EncapDxpuUDP, -1}, {encap.EncapNetTLP, -1}}, nil
	}
	e, err := encap.ParseEncap(name)
	if err != nil {
		return nil, err
	}
	return []FrameEncap{{e, vlan}}, nil
}

// MaxFrames and MaxBytes bound what `dxpu pcap generate` writes: a
// mistyped --count (or --ether-mtu) would fill the disk. MaxBytes bounds the
// most the options allow (every frame as long as --ether-mtu lets it be), not
// what a seed happens to give.
const (
	MaxFrames = 10_000_000
	MaxBytes  = 16 << 30
)

// Check reports the first option of t out of range, named as its flag.
func (o *Traffic) Check() error {
	switch {
	case o.Count < 1:
		return fmt.Errorf("--count %d: want at least 1 frame", o.Count)
	case o.Count > MaxFrames:
		return fmt.Errorf("--count %d: want at most %d frames", o.Count, MaxFrames)
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
	case o.Snaplen > 0 && o.Snaplen < minSnaplen:
		// Shorter keeps no dxpu header of some frames: a capture of
		// frames nothing can read.
		return fmt.Errorf("--snaplen %d: want 0 (whole frames) or at least %d (the headers of a tagged dxpu-udp frame)", o.Snaplen, minSnaplen)
	case o.Snaplen > pcapio.MaxSnaplen:
		return fmt.Errorf("--snaplen %d: want at most %d (0: whole frames)", o.Snaplen, pcapio.MaxSnaplen)
	case o.MTU > 65535:
		return fmt.Errorf("--ether-mtu %d: want at most 65535", o.MTU)
	}
	// The largest TLP (4DW header, data, ECRC) must fit a frame.
	if need := encap.HeaderLen + 2 + encap.IPv4HeaderLen + encap.UDPHeaderLen + 16 + 4*o.MaxDW + 4; o.MTU < need {
		return fmt.Errorf("--ether-mtu %d cannot carry a TLP of %d DWs: need at least %d", o.MTU, o.MaxDW, need)
	}
	for _, e := range o.Encaps {
		if e.VLAN < -1 || e.VLAN == 0 || e.VLAN > 4094 {
			return fmt.Errorf("--vlan %d: want 1..4094 (or -1 for none)", e.VLAN)
		}
	}
	if frame, by := o.maxFrame(); int64(o.Count)*int64(frame+pcapngRecordLen) > MaxBytes {
		hint := "lower --count, or cut frames with --snaplen"
		if o.Snaplen > 0 {
			hint = "lower --count or --snaplen"
		}
		return fmt.Errorf("--count %d: frames of up to %d bytes (%s) could make %.1f GiB: want at most %d GiB (%s)",
			o.Count, frame, by, float64(int64(o.Count)*int64(frame+pcapngRecordLen))/(1<<30), MaxBytes>>30, hint)
	}
	return nil
}

// minSnaplen is the shortest --snaplen: Ethernet, VLAN tag, IPv4, UDP
// and dxpu headers.
const minSnaplen = encap.EthHeaderLen + 4 + encap.IPv4HeaderLen + encap.UDPHeaderLen + encap.HeaderLen

// pcapngRecordLen is the most a capture adds to each frame (a pcapng
// enhanced packet block's header, trailer and padding; pcap adds 16).
const pcapngRecordLen = 32 + 3

// maxFrame is the most bytes one frame of o can keep in a capture, and
// the flag that sets it: a dxpu frame fills at most --ether-mtu after its
// Ethernet header and VLAN tag (a NetTLP frame's one TLP is shorter: the
// --ether-mtu check makes room for it and a dxpu header), --snaplen cuts it.
func (o *Traffic) maxFrame() (int, string) {
	frame := encap.EthHeaderLen + 4 + o.MTU
	if o.Snaplen > 0 && o.Snaplen < frame {
		return o.Snaplen, fmt.Sprintf("--snaplen %d", o.Snaplen)
	}
	return frame, fmt.Sprintf("--ether-mtu %d", o.MTU)
}

// WriteTraffic writes the traffic of o to a new capture at path and
// returns how many frames and TLPs of each kind it wrote. The capture
// replaces path only once it is whole: on an error or when ctx ends, path
// keeps what it had.
func WriteTraffic(ctx context.Context, path string, o Traffic, wo pcapio.WriterOptions) (map[string]int, error) {
	if o.Snaplen > 0 {
		wo.Snaplen = uint32(o.Snaplen)
	}
	w, err := createOutput(path, wo)
	if err != nil {
		return nil, err
	}
	defer w.abort()
	stats, err := generate(ctx, w.Writer, o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := w.commit(); err != nil {
		return nil, err
	}
	return stats, nil
}

// StatsLine prints counts as sorted name=count pairs.
func StatsLine(stats map[string]int) string {
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
