package capture

import (
	"fmt"
	"io"
	"os"
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
// wrote to stdout. Bad options are apperr.ErrUsage.
func Generate(o GenerateOptions, stdout io.Writer) error {
	if o.Out == "" {
		return apperr.Usage(fmt.Errorf("generate: --out is required"))
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
	stats, err := WriteTraffic(o.Out, t, pcapio.WriterOptions{PcapNG: o.PcapNG, Nanos: o.Nanos})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %s\n", o.Out, StatsLine(stats))
	return nil
}

// Encaps reads --encap: one encapsulation, or "mix" (dxpu-eth, dxpu-eth
// tagged with vlan or 100, dxpu-udp and NetTLP in turn).
func Encaps(name string, vlan int) ([]FrameEncap, error) {
	if name == "mix" {
		v := vlan
		if v < 0 {
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

// Check reports the first option of t out of range, named as its flag.
func (o *Traffic) Check() error {
	switch {
	case o.Count < 1:
		return fmt.Errorf("--count %d: want at least 1 frame", o.Count)
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

// WriteTraffic writes the traffic of o to a new capture at path and
// returns how many frames and TLPs of each kind it wrote. On error the
// file is removed.
func WriteTraffic(path string, o Traffic, wo pcapio.WriterOptions) (map[string]int, error) {
	if o.Snaplen > 0 {
		wo.Snaplen = uint32(o.Snaplen)
	}
	w, err := pcapio.Create(path, wo)
	if err != nil {
		return nil, err
	}
	stats, err := generate(w, o)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("%s: %w", path, err)
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
