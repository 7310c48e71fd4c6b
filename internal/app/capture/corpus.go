package capture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// Testdata writes the corpus into dir, or with check compares a fresh copy
// with dir: a difference is apperr.ErrFailed.
func Testdata(dir string, check bool, stdout io.Writer) error {
	if dir == "" {
		return apperr.Usage(fmt.Errorf("testdata: --dir is required"))
	}
	out := dir
	if check {
		// A corpus that is not there is not stale: say what is wrong.
		if fi, err := os.Stat(dir); err != nil {
			return apperr.Usage(fmt.Errorf("testdata: --dir %s: %w (--check compares with the corpus there)", dir, unwrapPath(err)))
		} else if !fi.IsDir() {
			return apperr.Usage(fmt.Errorf("testdata: --dir %s: not a directory", dir))
		}
		tmp, err := os.MkdirTemp("", "dxpu-pcap-testdata")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		out = tmp
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := WriteCorpus(out); err != nil {
		return err
	}
	if !check {
		fmt.Fprintf(stdout, "wrote %d captures and README.md to %s\n", len(corpus), dir)
		return nil
	}
	diff, err := CompareDirs(out, dir)
	if err != nil {
		return err
	}
	if len(diff) > 0 {
		return apperr.Failed(fmt.Errorf("%s is stale (%s): run go generate ./cmd/dxpu", dir, strings.Join(diff, ", ")))
	}
	fmt.Fprintf(stdout, "%s is up to date\n", dir)
	return nil
}

// unwrapPath drops the *fs.PathError's operation and path, which the
// message names already.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// corpus is the replay corpus in testdata/pcap: what `dxpu pcap
// testdata` writes. Change it and regenerate with `go generate ./cmd/dxpu`.
var corpus = []struct {
	name string
	desc string
	o    Traffic
	wo   pcapio.WriterOptions
}{
	{"dxpu-eth.pcap", "dxpu over raw Ethernet, untagged, every TLP kind, 4 pairs, ACK/NAK/CREDIT messages",
		Traffic{Encaps: []FrameEncap{{encap.EncapDxpuEth, -1}}, Count: 64, Seed: 1, Pairs: 4}, pcapio.WriterOptions{}},
	{"dxpu-eth-vlan.pcap", "dxpu over raw Ethernet with an 802.1Q tag (VLAN 100), 4 pairs",
		Traffic{Encaps: []FrameEncap{{encap.EncapDxpuEth, 100}}, Count: 64, Seed: 2, Pairs: 4}, pcapio.WriterOptions{}},
	{"dxpu-udp.pcap", "dxpu over IPv4/UDP port 8855, nanosecond timestamps, 6 pairs",
		Traffic{Encaps: []FrameEncap{{encap.EncapDxpuUDP, -1}}, Count: 64, Seed: 3, Pairs: 6}, pcapio.WriterOptions{Nanos: true}},
	{"dxpu-udp-vlan.pcapng", "dxpu over IPv4/UDP with VLAN 200, pcapng",
		Traffic{Encaps: []FrameEncap{{encap.EncapDxpuUDP, 200}}, Count: 32, Seed: 4, Pairs: 3}, pcapio.WriterOptions{PcapNG: true, Nanos: true}},
	{"nettlp.pcap", "NetTLP (UDP ports 0x3000+tag), one TLP per frame, every kind, nanosecond timestamps",
		Traffic{Encaps: []FrameEncap{{encap.EncapNetTLP, -1}}, Count: 64, Seed: 5, Pairs: 2}, pcapio.WriterOptions{Nanos: true}},
	{"nettlp-vlan-snap128.pcap", "NetTLP with VLAN 100 cut at 128 bytes like the NetTLP hardware captures",
		Traffic{Encaps: []FrameEncap{{encap.EncapNetTLP, 100}}, Count: 48, Seed: 6, Pairs: 2, Snaplen: 128}, pcapio.WriterOptions{Nanos: true}},
	{"mix.pcap", "all four encapsulations interleaved (dxpu-eth, dxpu-eth VLAN 100, dxpu-udp, NetTLP), 8 pairs",
		Traffic{Count: 96, Seed: 7, Pairs: 8}, pcapio.WriterOptions{}},
	{"mem-jumbo.pcap", "memory traffic only (MRd, MWr, Cpl, CplD) with payloads up to 1 KiB, MTU 9000, many TLPs per frame",
		Traffic{Encaps: []FrameEncap{{encap.EncapDxpuEth, -1}}, Count: 12, Seed: 8, Pairs: 2, MaxTLPs: 24, MaxDW: 256, MTU: 9000}, pcapio.WriterOptions{}},
}

// CorpusFiles lists the files WriteCorpus makes.
func CorpusFiles() []string {
	names := []string{"README.md"}
	for _, c := range corpus {
		names = append(names, c.name)
	}
	return names
}

func WriteCorpus(dir string) error {
	var readme strings.Builder
	readme.WriteString("# Synthetic TLP captures (generated: do not edit)\n\n" +
		"Written by `dxpu pcap testdata --dir testdata/pcap` (`go generate ./cmd/dxpu`);\n" +
		"`dxpu pcap testdata --dir testdata/pcap --check` verifies them. Every TLP obeys the\n" +
		"PCIe rules that `dxpu tlp decode` checks. Pair IDs, MACs (02:d7:<pair id>:<side>),\n" +
		"IPv4 addresses (10.0.<pair>.<side>) and timestamps (from 2026-01-01T00:00:00Z) are\n" +
		"deterministic. This is the XDP replay corpus.\n\n" +
		"| file | frames | contents |\n|---|---|---|\n")
	for _, c := range corpus {
		o := c.o
		if o.Kinds == nil {
			o.Kinds, _ = ParseKinds("mix")
			if strings.HasPrefix(c.name, "mem") {
				o.Kinds, _ = ParseKinds("mem")
			}
		}
		if o.Encaps == nil {
			o.Encaps, _ = Encaps("mix", 100)
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
		if err := o.Check(); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		stats, err := WriteTraffic(context.Background(), filepath.Join(dir, c.name), o, c.wo)
		if err != nil {
			return err
		}
		fmt.Fprintf(&readme, "| %s | %d | %s; %s |\n", c.name, o.Count, c.desc, StatsLine(stats))
	}
	return writeFile(filepath.Join(dir, "README.md"), []byte(readme.String()))
}

// CompareDirs returns the corpus files that differ between a and b.
func CompareDirs(a, b string) ([]string, error) {
	var diff []string
	for _, name := range CorpusFiles() {
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
