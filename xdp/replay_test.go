package xdp_test

import (
	"bytes"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/switchtest"
	"github.com/dxpu/dxpu/tlp/pcapio"
	"github.com/dxpu/dxpu/xdp"
)

// corpusPorts are the switch ports the replay corpus is switched through.
var corpusPorts = []xdp.PortSpec{
	{Name: "host", MAC: net.HardwareAddr{2, 0x5e, 0, 0, 0, 1}, IP: netip.MustParseAddr("10.255.0.1")},
	{Name: "gpu", MAC: net.HardwareAddr{2, 0x5e, 0, 0, 0, 2}, IP: netip.MustParseAddr("10.255.0.2")},
}

func readCapture(t *testing.T, path string) [][]byte {
	t.Helper()
	r, err := pcapio.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var frames [][]byte
	for {
		data, _, err := r.Next()
		if err == io.EOF {
			return frames
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		frames = append(frames, append([]byte(nil), data...))
	}
}

// TestReplayCorpusXDPEqualsGo runs every frame of every capture in
// testdata/pcap through the XDP program (BPF_PROG_TEST_RUN) and the Go
// path, and compares actions and rewritten bytes frame by frame.
func TestReplayCorpusXDPEqualsGo(t *testing.T) {
	privtest.BPF(t)
	privtest.NetNS(t)
	files, err := filepath.Glob("../testdata/pcap/*.pcap*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no replay corpus in the committed testdata/pcap (%v)", err)
	}
	tbl, err := switching.LoadTable("../testdata/switch/corpus-table.json")
	if err != nil {
		t.Fatal(err)
	}
	total := map[uint32]int{}
	for _, file := range files {
		frames := switching.AssignPorts(tbl, readCapture(t, file), "host")
		xout, ports, err := xdp.Replay(tbl, corpusPorts, xdp.Options{}, frames)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		fwd := switching.NewForwarder(0)
		rules, _, err := switching.Compile(tbl, ports, 0)
		if err != nil {
			t.Fatal(err)
		}
		fwd.SetPorts(ports)
		fwd.Update(rules)
		gout := fwd.Replay(frames, ports)
		for i := range frames {
			x, g := xout[i], gout[i]
			total[x.Action]++
			if x.Action != g.Action || !bytes.Equal(x.Frame, g.Frame) {
				t.Errorf("%s frame %d (port %s, %d bytes): XDP action %d, Go %v/%v (action %d)\nxdp %d bytes % x\ngo  %d bytes % x",
					filepath.Base(file), i+1, frames[i].Port, len(frames[i].Data), x.Action, g.Verdict, g.Reason, g.Action,
					len(x.Frame), head(x.Frame), len(g.Frame), head(g.Frame))
			}
		}
		if _, err := os.ReadFile(expectedPath(file)); err == nil {
			var got bytes.Buffer
			for _, o := range gout {
				got.Write(o.Frame)
			}
			var want bytes.Buffer
			for _, f := range readCapture(t, expectedPath(file)) {
				want.Write(f)
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Errorf("%s: forwarded frames differ from %s (if the corpus changed on purpose: testdata/switch/regen.sh)", file, expectedPath(file))
			}
		}
	}
	if total[switching.XDPRedirect] == 0 || total[switching.XDPPass] == 0 {
		t.Fatalf("corpus did not exercise both forwarding and the slow path: %v", total)
	}
	t.Logf("actions over the corpus: %v", total)
}

func expectedPath(capture string) string {
	return filepath.Join("../testdata/switch/expected", filepath.Base(capture)+".out.pcap")
}

func head(b []byte) []byte { return b[:min(len(b), 64)] }

// TestReplayFourteenByteFrame: a frame of just an Ethernet header runs
// through the program (a dxpu one is malformed: dropped); only shorter
// ones are passed without a run.
func TestReplayFourteenByteFrame(t *testing.T) {
	privtest.BPF(t)
	privtest.NetNS(t)
	tb := &table.Table{Version: 1, Pairs: []table.Pair{{ID: 1,
		Host: table.Endpoint{Port: "host", MAC: switchtest.MAC(1, 1)},
		GPU:  table.Endpoint{Port: "gpu", MAC: switchtest.MAC(2, 1)}}}}
	eth := []byte{2, 0x5e, 0, 0, 0, 1, 2, 0, 0, 0, 1, 1, 0x88, 0xb5}
	out, _, err := xdp.Replay(tb, corpusPorts, xdp.Options{}, []switching.ReplayFrame{{Port: "host", Data: eth}, {Port: "host", Data: eth[:13]}})
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Action != switching.XDPDrop || out[1].Action != switching.XDPPass {
		t.Fatalf("actions %d (14 bytes), %d (13 bytes); want drop, pass", out[0].Action, out[1].Action)
	}
}
