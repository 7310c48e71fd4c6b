package wireshark

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"

	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// tally counts what a comparison covered, so that a test can insist that
// it compared something.
type tally struct {
	tlps, controls, errors, truncated int
}

func (a *tally) add(b tally) {
	a.tlps += b.tlps
	a.controls += b.controls
	a.errors += b.errors
	a.truncated += b.truncated
}

// maxReported bounds the differences reported per capture.
const maxReported = 30

// checkCapture dissects capture with tshark and compares every frame with
// what encap and tlp read from it.
func checkCapture(t *testing.T, tshark, capture string) tally {
	t.Helper()
	r, err := pcapio.Open(capture)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var frames [][]byte
	for {
		data, _, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: frame %d: %v", capture, len(frames)+1, err)
		}
		frames = append(frames, data)
	}
	shown := dissect(t, tshark, capture)
	if len(shown) != len(frames) {
		t.Fatalf("%s: tshark shows %d frames, the capture holds %d", capture, len(shown), len(frames))
	}
	var total tally
	reported := 0
	for i, data := range frames {
		problems, n := checkFrame(shown[i], data)
		total.add(n)
		for _, p := range problems {
			if reported++; reported <= maxReported {
				t.Errorf("%s frame %d: %s", capture, i+1, p)
			}
		}
	}
	if reported > maxReported {
		t.Errorf("%s: %d more differences not shown", capture, reported-maxReported)
	}
	return total
}

func stopAt(keys ...string) func(string) bool {
	return func(k string) bool {
		for _, s := range keys {
			if k == s {
				return true
			}
		}
		return false
	}
}

var (
	stopNone   = stopAt()
	stopInDxpu = stopAt("dxpu.tlp", "dxpu.ctl")
)

// checkFrame compares tshark's layers for one frame with encap.ParseFrame,
// encap.ParseControl and tlp.Parse on its bytes.
func checkFrame(layers map[string]any, data []byte) (problems []string, n tally) {
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	dx, hasDx := layers["dxpu"].(map[string]any)
	nt, hasNt := layers["nettlp"].(map[string]any)
	// A Lua error outside the dissector's guard shows as _ws.lua.error,
	// one inside it as dxpu.expert.internal. (_ws.malformed is no sign of
	// one: it marks every expert info of the malformed group.)
	if hasKey(layers, "_ws.lua.error") || hasKey(layers, "dxpu.expert.internal") {
		bad("the dissector hit a Lua error")
	}
	f, err := encap.ParseFrame(data, nil)
	if f.Encap() == encap.EncapNone {
		// The dissector finds dxpu on any UDP port by its header: what
		// parses as dxpu to the datagram's destination port is dxpu.
		if hf, ok := heuristicDxpu(data); ok {
			f, err = hf, nil
		}
	}
	layer, want := dx, "dxpu"
	if f.Encap() == encap.EncapNetTLP {
		layer, want = nt, "nettlp"
	}
	switch {
	case f.Encap() == encap.EncapNone:
		if hasDx || hasNt {
			bad("the dissector claims a frame that is not dxpu or NetTLP (%v)", err)
		}
		return problems, n
	case layer == nil:
		return append(problems, fmt.Sprintf("no %s layer for a %s frame", want, f.Encap())), n
	case hasDx && hasNt:
		bad("both a dxpu and a nettlp layer")
	}
	if err != nil {
		ex := frameExpert(&f, err)
		if ex == "" {
			return problems, n // below dxpu: Wireshark's IPv4 and VLAN dissectors judge it
		}
		n.errors++
		if got := experts(layer, stopNone); !reflect.DeepEqual(got, []string{ex}) {
			bad("encap says %v: want expert %s, tshark shows %v", err, ex, got)
		}
		if _, ok := layer["dxpu.tlp"]; ok {
			bad("TLPs shown in a frame encap rejects (%v)", err)
		}
		return problems, n
	}
	stop := stopInDxpu
	var wantFields fields
	var seq *uint32
	if f.Encap() == encap.EncapNetTLP {
		wantFields = fields{"nettlp.seq": uint64(f.NetTLPSeq()), "nettlp.timestamp": uint64(f.NetTLPTimestamp())}
		problems = append(problems, diff(wantFields, flatten(layer, stop), "nettlp.")...)
	} else {
		h := f.Header()
		wantFields = headerFields(h)
		switch h.Type() {
		case encap.MsgTLP:
			var lens []uint64
			for i := 0; i < h.Count() && encap.HeaderLen+2*i+2 <= len(h); i++ {
				lens = append(lens, uint64(h.TLPLen(i)))
			}
			if len(lens) > 0 {
				wantFields["dxpu.tlp_len"] = lens
			}
			s := h.Seq()
			seq = &s
		case encap.MsgControl:
			problems = append(problems, checkControl(layer["dxpu.ctl"], f.Body(), &n)...)
		default:
			if b := f.Body(); len(b) > 0 {
				wantFields["dxpu.body"] = b
			}
		}
		if _, ok := layer["dxpu.ctl"]; ok && h.Type() != encap.MsgControl {
			bad("a control message shown in a %v frame", h.Type())
		}
		problems = append(problems, diff(wantFields, flatten(layer, stop), "dxpu.")...)
	}
	var wantExperts []string
	if f.Truncated() {
		n.truncated++
		wantExperts = []string{"dxpu.expert.truncated"}
	}
	if got := experts(layer, stop); !reflect.DeepEqual(got, wantExperts) {
		bad("frame expert infos %v, want %v (truncated %t)", got, wantExperts, f.Truncated())
	}
	problems = append(problems, checkTLPs(asList(layer["dxpu.tlp"]), &f, seq, &n)...)
	return problems, n
}

// checkControl compares the control message subtree with
// encap.ParseControl on the body.
func checkControl(shown any, body []byte, n *tally) []string {
	ctl, ok := shown.(map[string]any)
	if !ok {
		return []string{"CONTROL frame without a dxpu.ctl subtree"}
	}
	c, err := encap.ParseControl(body)
	got := experts(ctl, stopNone)
	if err != nil {
		n.errors++
		if !reflect.DeepEqual(got, []string{"dxpu.expert.control"}) {
			return []string{fmt.Sprintf("encap says %v: want expert dxpu.expert.control, tshark shows %v", err, got)}
		}
		return nil
	}
	n.controls++
	problems := diff(controlFields(c, body), flatten(ctl, stopNone), "dxpu.ctl.")
	if len(got) > 0 {
		problems = append(problems, fmt.Sprintf("expert infos %v on a %v message encap accepts", got, c.Type))
	}
	return problems
}

// checkTLPs compares the TLP subtrees with tlp.Parse (tlp.ParseTruncated
// for TLPs cut by the capture) on each TLP of f.
func checkTLPs(shown []any, f *encap.Frame, seq *uint32, n *tally) []string {
	if len(shown) != f.NumTLPs() {
		return []string{fmt.Sprintf("%d TLPs shown, encap reads %d", len(shown), f.NumTLPs())}
	}
	var problems []string
	for i := range f.NumTLPs() {
		bad := func(format string, args ...any) {
			problems = append(problems, fmt.Sprintf("TLP %d: ", i)+fmt.Sprintf(format, args...))
		}
		got, ok := shown[i].(map[string]any)
		if !ok {
			bad("subtree is %T", shown[i])
			continue
		}
		b, cut := f.TLP(i)
		var err error
		if cut {
			_, _, err = tlp.ParseTruncated(b)
		} else {
			_, err = tlp.Parse(b)
		}
		gotExperts := experts(got, stopNone)
		if err != nil && structuralTLPError(err) {
			n.errors++
			if !reflect.DeepEqual(gotExperts, []string{"dxpu.expert.tlp"}) {
				bad("tlp says %v: want expert dxpu.expert.tlp, tshark shows %v", err, gotExperts)
			}
			if len(b) >= 4 {
				if k := tlp.View(b).Kind().String(); !matches(flatten(got, stopNone)["dxpu.tlp.kind"], k) {
					bad("kind %v, want %s", flatten(got, stopNone)["dxpu.tlp.kind"], k)
				}
			}
			continue
		}
		// Rules on field values (byte enables, ECRC, ...) are not the
		// dissector's to judge: it shows the fields as they are.
		var s *uint32
		if seq != nil {
			v := *seq + uint32(i)
			s = &v
		}
		want, derr := tlpFields(tlp.View(b), i, s)
		if derr != nil {
			bad("tlp cannot decode what Parse accepted: %v", derr)
			continue
		}
		n.tlps++
		for _, p := range diff(want, flatten(got, stopNone), "dxpu.tlp.") {
			bad("%s (%s)", p, tlp.View(b).Kind())
		}
		if len(gotExperts) > 0 {
			bad("expert infos %v on a TLP tlp.Parse reads (err %v)", gotExperts, err)
		}
	}
	return problems
}

// heuristicDxpu parses a UDP datagram to a port other than dxpu's as dxpu
// to that port; ok when it parses whole, as the dissector's heuristic
// claims it then (the heuristic also wants the reserved byte 0).
func heuristicDxpu(data []byte) (encap.Frame, bool) {
	lay, err := encap.Walk(data, nil)
	if err != nil || lay.IPv4 == 0 {
		return encap.Frame{}, false
	}
	ip := encap.IPv4(data[lay.IPv4:])
	l4 := lay.IPv4 + ip.HeaderLen()
	if ip.Protocol() != encap.IPProtoUDP || l4+encap.UDPHeaderLen > len(data) {
		return encap.Frame{}, false
	}
	cfg := &encap.Config{UDPPort: encap.UDP(data[l4:]).DstPort()}
	f, err := encap.ParseFrame(data, cfg)
	if err != nil || f.Encap() != encap.EncapDxpuUDP || f.Truncated() || f.Header()[27] != 0 {
		return encap.Frame{}, false
	}
	return f, true
}
