package capture

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/internal/app/apperr"

	"github.com/dxpu/dxpu/internal/shareddata"
	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// TestPcapCorpusReproducible regenerates testdata/pcap into a temporary
// directory: every file must be byte-identical to the committed one.
func TestPcapCorpusReproducible(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := WriteCorpus(dir); err != nil {
		t.Fatal(err)
	}
	committed := filepath.Join("..", "..", "..", "testdata", "pcap")
	diff, err := CompareDirs(dir, committed)
	if err != nil {
		t.Fatal(err)
	}
	if len(diff) > 0 {
		t.Fatalf("testdata/pcap is stale (%v): run go generate ./cmd/dxpu", diff)
	}
	var total int64
	for _, name := range CorpusFiles() {
		st, _ := os.Stat(filepath.Join(committed, name))
		total += st.Size()
	}
	if total > 512<<10 {
		t.Errorf("corpus is %d bytes, keep it under 512 KiB", total)
	}
}

// TestPcapGeneratorValid: every generated TLP of every kind passes the
// codec's validation, and each kind appears.
func TestPcapGeneratorValid(t *testing.T) {
	t.Parallel()
	for _, k := range allKinds {
		g := &tlpGen{r: rand.New(rand.NewPCG(uint64(k), 9)), kinds: []tlp.Kind{k}, maxDW: 64}
		for i := 0; i < 2000; i++ {
			b, err := g.next(nil, tlp.NewID(1, 2, 3))
			if err != nil {
				t.Fatalf("%v #%d: %v", k, i, err)
			}
			v, err := tlp.Parse(b)
			if err != nil || v.Kind() != k {
				t.Fatalf("%v #%d: %x parses as %v: %v", k, i, b, v.Kind(), err)
			}
		}
	}
}

type pcapTLPRec struct {
	b         []byte
	truncated bool
}

// pcapReadTLPs returns every TLP of a capture in order, and the number of
// dxpu messages without TLPs.
func pcapReadTLPs(t *testing.T, path string) (out []pcapTLPRec, msgs int) {
	t.Helper()
	r, err := pcapio.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := 1; ; i++ {
		data, _, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, msgs
		}
		if err != nil {
			t.Fatal(err)
		}
		f, err := encap.ParseFrame(data, nil)
		if err != nil {
			t.Fatalf("%s frame %d: %v", path, i, err)
		}
		if h := f.Header(); h != nil && h.Type() != encap.MsgTLP {
			msgs++
		}
		for j := 0; j < f.NumTLPs(); j++ {
			b, tr := f.TLP(j)
			if tr && len(b) == 0 {
				break
			}
			out = append(out, pcapTLPRec{append([]byte(nil), b...), tr})
		}
	}
}

// convertTo returns the options of `dxpu pcap convert --in in --out out
// --to to` with the flags' defaults.
func convertTo(in, out, to string) ConvertOptions {
	return ConvertOptions{In: in, Out: out, To: to, VLAN: -1, Pair: 1, UDPPort: encap.DefaultUDPPort,
		SrcIP: "10.0.0.1", DstIP: "10.0.0.2", MTU: encap.DefaultMTU}
}

// convert runs Convert with its output in the test log.
func convert(t *testing.T, o ConvertOptions) error {
	t.Helper()
	var out bytes.Buffer
	err := Convert(t.Context(), o, &out, &out)
	t.Logf("convert %+v: %s", o, out.String())
	return err
}

// TestPcapConvert converts captures through every encapsulation and back:
// the TLPs (bytes, and whether the capture cut them) never change.
func TestPcapConvert(t *testing.T) {
	t.Parallel()
	inputs := []string{filepath.Join("..", "..", "..", "testdata", "pcap", "mix.pcap"),
		filepath.Join("..", "..", "..", "testdata", "pcap", "nettlp-vlan-snap128.pcap")}
	// A real NVMe capture too, when ../shared is there (CI requires it).
	if root, err := shareddata.Root(); err == nil {
		inputs = append(inputs, filepath.Join(root, "testdata", "nettlp", "nic-and-nvme", "pm1725", "pm1725-read-8blk.pcap"))
	} else if shareddata.Required() {
		t.Fatalf("%s=1 but %v", shareddata.RequireEnv, err)
	} else {
		t.Logf("without the shared capture: %v", err)
	}
	dir := t.TempDir()
	for _, in := range inputs {
		want, _ := pcapReadTLPs(t, in)
		prev := in
		for i, to := range []string{"dxpu-eth", "nettlp", "dxpu-udp", "dxpu-eth", "nettlp"} {
			out := filepath.Join(dir, filepath.Base(in)+"."+to+string(rune('0'+i))+".pcap")
			o := convertTo(prev, out, to)
			if i == 2 {
				o.PcapNG, o.VLAN = true, 7
			}
			if err := convert(t, o); err != nil {
				t.Fatalf("%s -> %s: %v", prev, to, err)
			}
			got, _ := pcapReadTLPs(t, out)
			if len(got) != len(want) {
				t.Fatalf("%s -> %s: %d TLPs, want %d", prev, to, len(got), len(want))
			}
			for j := range want {
				if !bytes.Equal(got[j].b, want[j].b) || got[j].truncated != want[j].truncated {
					t.Fatalf("%s -> %s: TLP %d = %x (truncated %v), want %x (%v)", prev, to, j, got[j].b, got[j].truncated, want[j].b, want[j].truncated)
				}
			}
			prev = out
		}
	}
	// dxpu messages without TLPs survive dxpu -> dxpu conversion.
	in := filepath.Join("..", "..", "..", "testdata", "pcap", "dxpu-eth.pcap")
	_, msgs := pcapReadTLPs(t, in)
	out := filepath.Join(dir, "msgs.pcap")
	if err := convert(t, convertTo(in, out, "dxpu-udp")); err != nil {
		t.Fatal(err)
	}
	if _, got := pcapReadTLPs(t, out); got != msgs || msgs == 0 {
		t.Errorf("%d ACK/NAK/CREDIT messages after conversion, %d before", got, msgs)
	}
}

// TestPcapUsageErrors: bad options are usage errors; a missing input is an
// I/O error naming the file (both exit status 2 on the command line).
func TestPcapUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	gen := func(kind string, mtu int) error {
		return Generate(t.Context(), GenerateOptions{Out: filepath.Join(dir, "g.pcap"), Kind: kind, Encap: "mix", VLAN: -1, Count: 100, Seed: 1,
			Pairs: 4, MaxTLPs: 8, MaxDW: 32, MTU: mtu, Control: 10}, io.Discard)
	}
	for name, err := range map[string]error{
		"--to ipx":         convert(t, convertTo("x", filepath.Join(dir, "y"), "ipx")),
		"--kind Foo":       gen("Foo", 1500),
		"--ether-mtu 100":  gen("mix", 100),
		"--pack to nettlp": convert(t, ConvertOptions{In: "x", Out: filepath.Join(dir, "y"), To: "nettlp", Pack: true, SrcIP: "10.0.0.1", DstIP: "10.0.0.2", MTU: 1500}),
	} {
		if !errors.Is(err, apperr.ErrUsage) {
			t.Errorf("%s: %v, want a usage error", name, err)
		}
	}
	missing := filepath.Join(dir, "missing.pcap")
	err := convert(t, convertTo(missing, filepath.Join(dir, "y"), "nettlp"))
	if err == nil || errors.Is(err, apperr.ErrUsage) || errors.Is(err, apperr.ErrFailed) || !strings.Contains(err.Error(), "missing.pcap") {
		t.Errorf("missing input: %v, want an I/O error naming it", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "g.pcap")); !os.IsNotExist(err) {
		t.Errorf("a refused generate left its output behind: %v", err)
	}
}

// TestPcapGenerateFlags generates with explicit flags and reads it back.
func TestPcapGenerateFlags(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "g.pcapng")
	var printed bytes.Buffer
	if err := Generate(t.Context(), GenerateOptions{Out: out, Kind: "MRd,CplD", Encap: "dxpu-udp", VLAN: 12, Count: 20, Seed: 5, Pairs: 3,
		MaxTLPs: 8, MaxDW: 32, MTU: 1500, Control: 10, PcapNG: true, Nanos: true}, &printed); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(printed.String(), out+": ") || !strings.Contains(printed.String(), "frames dxpu-udp+vlan12=") {
		t.Errorf("generate printed %q", printed.String())
	}
	tlps, _ := pcapReadTLPs(t, out)
	if len(tlps) == 0 {
		t.Fatal("no TLPs")
	}
	for _, r := range tlps {
		if k := tlp.View(r.b).Kind(); k != tlp.MRd && k != tlp.CplD {
			t.Fatalf("kind %v generated", k)
		}
	}
	s, err := Tally(out, nil, nil)
	if err != nil || s["frames"] != 20 || s["encap:dxpu-udp"] != 20 || s["vlan-tagged"] != 20 || s["bad"] != 0 {
		t.Errorf("info %v %v", s, err)
	}
}

// TestPcapCorpusValid: every TLP of the committed corpus passes the codec's
// validation (whole TLPs with Parse, those cut by a snap length with
// ParseTruncated).
func TestPcapCorpusValid(t *testing.T) {
	t.Parallel()
	for _, c := range corpus {
		path := filepath.Join("..", "..", "..", "testdata", "pcap", c.name)
		tlps, _ := pcapReadTLPs(t, path)
		if len(tlps) == 0 {
			t.Fatalf("%s: no TLPs", c.name)
		}
		for i, r := range tlps {
			var err error
			if r.truncated {
				_, _, err = tlp.ParseTruncated(r.b)
			} else {
				_, err = tlp.Parse(r.b)
			}
			if err != nil {
				t.Errorf("%s TLP %d (%x): %v", c.name, i, r.b, err)
			}
		}
	}
}

// TestPcapConvertPack packs NetTLP TLPs into dxpu frames: same TLPs in the
// same order, fewer frames, none over the MTU, sequence numbers running on.
func TestPcapConvertPack(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, in := range []string{
		filepath.Join("..", "..", "..", "testdata", "pcap", "nettlp.pcap"),
		filepath.Join("..", "..", "..", "testdata", "pcap", "nettlp-vlan-snap128.pcap"),
	} {
		want, _ := pcapReadTLPs(t, in)
		out := filepath.Join(dir, filepath.Base(in)+".packed.pcap")
		o := convertTo(in, out, "dxpu-udp")
		o.Pack, o.MTU = true, 600
		if err := convert(t, o); err != nil {
			t.Fatal(err)
		}
		got, _ := pcapReadTLPs(t, out)
		if len(got) != len(want) {
			t.Fatalf("%s: %d TLPs, want %d", in, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i].b, want[i].b) || got[i].truncated != want[i].truncated {
				t.Fatalf("%s: TLP %d differs", in, i)
			}
		}
		s, err := Tally(out, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if s["frames"] >= len(want) && !strings.Contains(in, "snap128") {
			t.Errorf("%s: %d frames for %d TLPs: nothing packed", in, s["frames"], len(want))
		}
		r, _ := pcapio.Open(out)
		nextSeq := map[string]uint32{} // per (source, destination) MAC pair
		for {
			data, ci, err := r.Next()
			if err != nil {
				break
			}
			f, _ := encap.ParseFrame(data, nil)
			if ci.Length-14-4*f.NumVLANs() > 600 {
				t.Errorf("frame of %d bytes over the MTU", ci.Length)
			}
			key := string(f.SrcMAC()) + string(f.DstMAC())
			h := f.Header()
			if n, ok := nextSeq[key]; ok && h.Seq() != n {
				t.Errorf("frame seq %d, want %d", h.Seq(), n)
			}
			nextSeq[key] = h.Seq() + uint32(h.Count())
		}
		r.Close()
		t.Logf("%s: %d TLPs in %d frames", in, len(want), s["frames"])
	}
}
