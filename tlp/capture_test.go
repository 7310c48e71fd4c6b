package tlp_test

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// The per-file counts were checked against an independent extraction with
// tshark (first header byte of each UDP payload after the 6-byte NetTLP
// header): 00 = MRd (plus the zero-BE ones below), 40 = MWr, 4a = CplD,
// a0 = Fmt 101. The spec-breaking frames are MRds with Length 0 (1024 DW)
// and both byte enables 0 (89 of them all-zero TLPs) and two with the
// reserved Fmt 101.
var captureCounts = []struct {
	file                string
	mrd, mwr, cpld      int
	zeroBE, reservedFmt int
}{
	{"p4600/p4600-read-1blk.pcap", 0, 2, 0, 0, 0},
	{"p4600/p4600-read-32blk.pcap", 0, 64, 0, 0, 0},
	{"p4600/p4600-read-4blk.pcap", 0, 8, 0, 0, 0},
	{"p4600/p4600-read-64blk.pcap", 0, 128, 0, 0, 0},
	{"p4600/p4600-read-8blk.pcap", 0, 16, 0, 0, 0},
	{"p4600/p4600-write-1blk.pcap", 1, 0, 2, 0, 0},
	{"p4600/p4600-write-32blk.pcap", 32, 0, 64, 0, 0},
	{"p4600/p4600-write-4blk.pcap", 4, 0, 8, 0, 0},
	{"p4600/p4600-write-64blk.pcap", 64, 0, 128, 0, 0},
	{"p4600/p4600-write-8blk.pcap", 8, 0, 16, 0, 0},
	{"pm1725/pm1725-read-16blk.pcap", 0, 253, 0, 51, 0},
	{"pm1725/pm1725-read-1blk.pcap", 0, 16, 0, 0, 0},
	{"pm1725/pm1725-read-4blk.pcap", 0, 64, 0, 0, 0},
	{"pm1725/pm1725-read-8blk.pcap", 0, 126, 0, 39, 2},
	{"pm1725/pm1725-write-16blk.pcap", 128, 0, 256, 0, 0},
	{"pm1725/pm1725-write-1blk.pcap", 8, 0, 16, 0, 0},
	{"pm1725/pm1725-write-4blk.pcap", 32, 0, 64, 0, 0},
	{"pm1725/pm1725-write-8blk.pcap", 64, 0, 128, 0, 0},
	{"x520/x520-1024B-16pkt.pcap", 32, 0, 64, 0, 0},
	{"x520/x520-1024B-1pkt.pcap", 2, 0, 4, 0, 0},
	{"x520/x520-1024B-32pkt.pcap", 64, 0, 128, 0, 0},
	{"x520/x520-1500B-16pkt.pcap", 48, 0, 96, 0, 0},
	{"x520/x520-1500B-1pkt.pcap", 3, 0, 6, 0, 0},
	{"x520/x520-1500B-32pkt.pcap", 96, 0, 192, 0, 0},
	{"x520/x520-512B-16pkt.pcap", 16, 0, 32, 0, 0},
	{"x520/x520-512B-1pkt.pcap", 1, 0, 2, 0, 0},
	{"x520/x520-512B-32pkt.pcap", 32, 0, 64, 0, 0},
	{"x520/x520-64B-16pkt.pcap", 16, 0, 16, 0, 0},
	{"x520/x520-64B-1pkt.pcap", 1, 0, 1, 0, 0},
	{"x520/x520-64B-32pkt.pcap", 32, 0, 32, 0, 0},
	{"xl710/xl710-1024B-16pkt.pcap", 32, 0, 64, 0, 0},
	{"xl710/xl710-1024B-1pkt.pcap", 2, 0, 4, 0, 0},
	{"xl710/xl710-1024B-32pkt.pcap", 64, 0, 128, 0, 0},
	{"xl710/xl710-1500B-16pkt.pcap", 48, 0, 96, 0, 0},
	{"xl710/xl710-1500B-1pkt.pcap", 3, 0, 6, 0, 0},
	{"xl710/xl710-1500B-32pkt.pcap", 96, 0, 192, 0, 0},
	{"xl710/xl710-512B-16pkt.pcap", 16, 0, 32, 0, 0},
	{"xl710/xl710-512B-1pkt.pcap", 1, 0, 2, 0, 0},
	{"xl710/xl710-512B-32pkt.pcap", 32, 0, 64, 0, 0},
	{"xl710/xl710-64B-16pkt.pcap", 16, 0, 16, 0, 0},
	{"xl710/xl710-64B-1pkt.pcap", 1, 0, 1, 0, 0},
	{"xl710/xl710-64B-32pkt.pcap", 32, 0, 32, 0, 0},
}

func TestNetTLPCaptures(t *testing.T) {
	t.Parallel()
	root := privtest.SharedDir(t, "testdata", "nettlp", "nic-and-nvme")
	var totals [5]int
	for _, c := range captureCounts {
		t.Run(filepath.Base(c.file), func(t *testing.T) {
			r, err := pcapio.Open(filepath.Join(root, c.file))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var got [5]int
			var p tlp.Packet
			for frame := 1; ; frame++ {
				data, _, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("frame %d: %v", frame, err)
				}
				f, err := encap.ParseFrame(data, nil)
				if err != nil || f.Encap() != encap.EncapNetTLP || f.NumTLPs() != 1 {
					t.Fatalf("frame %d: encap %v, %d TLPs, %v", frame, f.Encap(), f.NumTLPs(), err)
				}
				b, truncated := f.TLP(0)
				v, cut, err := tlp.ParseTruncated(b)
				if cut != truncated && err == nil {
					t.Errorf("frame %d: frame says truncated=%v, TLP %v", frame, truncated, cut)
				}
				switch rule := tlp.RuleOf(err); {
				case err == nil:
				case rule == tlp.RuleZeroBE:
					got[3]++
					continue
				case rule == tlp.RuleReservedFmt:
					got[4]++
					continue
				default:
					t.Errorf("frame %d: unexpected %v", frame, err)
					continue
				}
				if err := p.Decode(v); err != nil {
					t.Fatalf("frame %d: %v", frame, err)
				}
				switch p.Kind {
				case tlp.MRd:
					got[0]++
				case tlp.MWr:
					got[1]++
				case tlp.CplD:
					got[2]++
				default:
					t.Errorf("frame %d: kind %v", frame, p.Kind)
				}
				if !cut {
					// encode(decode(x)) == x on every whole TLP.
					enc, err := p.Encode()
					if err != nil || !bytes.Equal(enc, b) {
						t.Errorf("frame %d: re-encode %x (%v), want %x", frame, enc, err, b)
					}
				} else if _, err := tlp.Parse(b); !errors.Is(err, tlp.ErrTruncated) {
					t.Errorf("frame %d: strict Parse of a cut TLP: %v", frame, err)
				}
			}
			want := [5]int{c.mrd, c.mwr, c.cpld, c.zeroBE, c.reservedFmt}
			if got != want {
				t.Errorf("MRd/MWr/CplD/zero-BE/reserved-Fmt = %v, want %v", got, want)
			}
			for i := range got {
				totals[i] += got[i]
			}
		})
	}
	if want := [5]int{1027, 677, 1956, 90, 2}; totals != want {
		t.Errorf("totals %v, want %v", totals, want)
	}
}
