package main

import (
	"encoding/json"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"

	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// snaplenCaptures writes two captures of one dxpu-over-UDP frame (pair
// 3, one MRd): cut holds it whole, cut by the snap length within its dxpu
// header, and cut within its IPv4 header; mixed holds it cut within its
// dxpu header (frame 1), whole with a wrong dxpu version (frame 2), and
// cut short with a wrong IPv4 version before the cut (frame 3).
func snaplenCaptures(t *testing.T) (cut, mixed string) {
	t.Helper()
	mrd, err := (&tlp.Packet{Kind: tlp.MRd, Length: 1, RequesterID: 0x0100, Tag: 5, FirstBE: 0xf, Address: 0x1000}).AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := encap.AppendDxpuUDP(nil, &encap.L2{}, &encap.L3{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2")},
		&encap.Fields{PairID: 3, Seq: 1}, [][]byte{mrd})
	if err != nil {
		t.Fatal(err)
	}
	const dxpuAt = encap.EthHeaderLen + encap.IPv4HeaderLen + encap.UDPHeaderLen
	bad := append([]byte(nil), whole...)
	bad[dxpuAt+encap.HeaderVersionFlagsOffset] = 0x70 // version 7
	badIP := append([]byte(nil), whole...)
	badIP[encap.EthHeaderLen] = 0x65 // IPv4 version 6
	type rec struct {
		frame []byte
		keep  int // bytes kept: the snap length
	}
	write := func(name string, recs ...rec) string {
		path := filepath.Join(t.TempDir(), name)
		w, err := pcapio.Create(path, pcapio.WriterOptions{Nanos: true})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range recs {
			ci := gopacket.CaptureInfo{Timestamp: time.Unix(1, int64(i)), CaptureLength: r.keep, Length: len(r.frame)}
			if err := w.WritePacket(ci, r.frame[:r.keep]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cut = write("cut.pcap", rec{whole, len(whole)}, rec{whole, dxpuAt + 8}, rec{whole, 30})
	mixed = write("mixed.pcap", rec{whole, dxpuAt + 8}, rec{bad, len(bad)}, rec{badIP, dxpuAt + 8})
	return cut, mixed
}

// TestPcapInfoSnaplenCut: third new-user trial. A frame that the
// capture's snap length cut before the end of its dxpu header is counted
// as such (snaplen_cut_frames, a text line), not as a frame that did not
// parse: a capture whose only problem is the snap length reports and
// exits 0. A frame that does not parse, whole, still fails (exit 1), and
// so does one cut short whose bytes are wrong before the cut.
func TestPcapInfoSnaplenCut(t *testing.T) {
	t.Parallel()
	cut, mixed := snaplenCaptures(t)
	for _, args := range [][]string{{"pcap", "info", "--json", cut}, {"pcap", "info", cut}} {
		code, stdout, stderr := runPcap(t.Context(), args...)
		if code != 0 || stderr != "" {
			t.Errorf("dxpu %q: exit %d, stderr %q; want 0 and nothing on stderr", args, code, stderr)
		}
		if args[2] == "--json" {
			var in struct {
				Frames     int `json:"frames"`
				Bad        int `json:"bad_frames"`
				SnaplenCut int `json:"snaplen_cut_frames"`
			}
			if err := json.Unmarshal([]byte(stdout), &in); err != nil || in.Frames != 3 || in.Bad != 0 || in.SnaplenCut != 2 {
				t.Errorf("dxpu %q: %+v (%v) from %s; want 3 frames, 0 bad, 2 cut by the snap length", args, in, err, stdout)
			}
		} else if !strings.Contains(stdout, "frames           3 (0 VLAN-tagged, 0 sealed, 2 cut by the snap length within their headers, 0 did not parse)") {
			t.Errorf("dxpu %q: stdout %q; want the cut frames counted on the frames line", args, stdout)
		}
	}

	code, stdout, stderr := runPcap(t.Context(), "pcap", "info", "--json", mixed)
	var in struct {
		Bad        int `json:"bad_frames"`
		SnaplenCut int `json:"snaplen_cut_frames"`
	}
	if err := json.Unmarshal([]byte(stdout), &in); code != 1 || err != nil || in.Bad != 2 || in.SnaplenCut != 1 ||
		!strings.Contains(stderr, "frame 2: ") || !strings.Contains(stderr, "frame 3: ") || strings.Contains(stderr, "frame 1: ") {
		t.Errorf("pcap info of bad frames and a cut one: exit %d, %+v (%v), stderr %q; want 1, 2 bad (frames 2 and 3), 1 cut", code, in, err, stderr)
	}
}

// TestTlpDecodeSnaplenCut: tlp decode --pcap, as pcap info, takes a frame
// that the capture's snap length cut within its headers for cut, not
// wrong: it is skipped and counted in one stderr line naming the first,
// and a capture whose only problem that is exits 0 with its TLPs (it
// printed an error object per cut frame and exited 1). Frames wrong
// before the cut still fail.
func TestTlpDecodeSnaplenCut(t *testing.T) {
	t.Parallel()
	cut, mixed := snaplenCaptures(t)
	code, stdout, stderr := runPcap(t.Context(), "tlp", "decode", "--pcap", cut)
	want := "dxpu tlp decode: " + cut + ": 2 of 3 frames cut by the capture's snap length within their headers (the first: frame 2): skipped, their TLPs unknown\n"
	if code != 0 || stderr != want || strings.Count(stdout, "\n") != 1 || !strings.Contains(stdout, `"frame":1,`) || !strings.Contains(stdout, `"kind":"MRd"`) {
		t.Errorf("tlp decode --pcap of a whole frame and two cut: exit %d, stdout %q, stderr %q; want 0, the whole frame's MRd, and %q", code, stdout, stderr, want)
	}
	code, stdout, stderr = runPcap(t.Context(), "tlp", "decode", "--pcap", mixed)
	if code != 1 || strings.Contains(stdout, `"frame":1,`) || !strings.Contains(stdout, `"frame":2,`) || !strings.Contains(stdout, `"frame":3,`) ||
		!strings.Contains(stderr, "1 of 3 frames cut by the capture's snap length") || !strings.HasSuffix(stderr, "dxpu: tlp decode: 2 of 2 TLPs did not decode\n") {
		t.Errorf("tlp decode --pcap of bad frames and a cut one: exit %d, stdout %q, stderr %q; want 1, errors for frames 2 and 3 only, the cut one counted", code, stdout, stderr)
	}
}
