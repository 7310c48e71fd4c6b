package xdp_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/switchtest"
	"github.com/dxpu/dxpu/internal/xdptest"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/xdp"
)

// fixture loads the program in a scratch namespace with dummy ports named
// as switchtest's, and a Go forwarder over the same table and ifindexes.
type fixture struct {
	ns    xdptest.NS
	sw    *xdp.Switch
	fwd   *switching.Forwarder
	ports map[string]switching.Port
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	privtest.BPF(t)
	privtest.NetNS(t)
	ns := xdptest.NewNS(t, "xdp-testrun")
	ifs := xdptest.AddPorts(t, ns, switchtest.PortNames, nil)
	index := map[string]uint32{}
	for _, i := range ifs {
		index[i.Name] = uint32(i.Index)
	}
	ports := switchtest.Ports(index)
	sw, err := xdp.Load(xdp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sw.Close() })
	// Devmap entries name interfaces of the caller's namespace.
	if err := ns.Do(func() error {
		skipped, err := sw.Reconcile(switchtest.Table(), ports)
		if err == nil && len(skipped) != 0 {
			err = fmt.Errorf("skipped %v", skipped)
		}
		return err
	}); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	fwd := switching.NewForwarder(0)
	fwd.SetPorts(ports)
	rules, _, err := switching.Compile(switchtest.Table(), ports, 0)
	if err != nil {
		t.Fatal(err)
	}
	fwd.Update(rules)
	return &fixture{ns: ns, sw: sw, fwd: fwd, ports: ports}
}

// compare runs every case through both paths and reports disagreements.
func (f *fixture) compare(t *testing.T, cases []switchtest.Case) {
	t.Helper()
	err := f.ns.Do(func() error {
		for _, c := range cases {
			in := f.ports[c.Port].Index
			if len(c.Frame) < 14 {
				// BPF_PROG_TEST_RUN refuses frames shorter than an
				// Ethernet header, and no NIC delivers them; the Go
				// path must leave them to the stack.
				buf := append([]byte(nil), c.Frame...)
				if r := switching.NewForwarder(0).Forward(buf, 0, in); r.Verdict != switching.VerdictPass {
					t.Errorf("%s: runt got %v", c.Name, r.Verdict)
				}
				continue
			}
			act, out, err := f.sw.TestRun(c.Frame, in)
			if err != nil {
				return fmt.Errorf("%s: %w", c.Name, err)
			}
			buf := append(make([]byte, switching.Headroom), c.Frame...)
			res := f.fwd.Forward(buf, switching.Headroom, in)
			goOut := buf[res.Off:]
			if want := res.Verdict.XDPAction(); act != want {
				t.Errorf("%s: XDP action %d, Go verdict %v (action %d, reason %v)", c.Name, act, res.Verdict, want, res.Reason)
				continue
			}
			if !bytes.Equal(out, goOut) {
				t.Errorf("%s: rewritten frames differ\nxdp % x\ngo  % x", c.Name, out, goOut)
			}
			if c.Want != 255 && (res.Verdict != c.Want || res.Reason != c.Reason) {
				t.Errorf("%s: Go path %v/%v, want %v/%v", c.Name, res.Verdict, res.Reason, c.Want, c.Reason)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestXDPMatchesGoOnCorpus(t *testing.T) {
	f := newFixture(t)
	f.compare(t, switchtest.Corpus())
	f.compareCounters(t)
}

// TestXDPZeroChecksumSentAsFFFF: the XDP program, like the Go path, sends
// a UDP checksum its rewrite updates to 0x0000 as 0xffff (0 would mean
// "no checksum"), and the frame otherwise matches the Go path's.
func TestXDPZeroChecksumSentAsFFFF(t *testing.T) {
	f := newFixture(t)
	c := switchtest.ZeroFoldCase()
	if err := f.ns.Do(func() error {
		act, out, err := f.sw.TestRun(c.Frame, f.ports[c.Port].Index)
		if err != nil {
			return err
		}
		if want := c.Want.XDPAction(); act != want {
			t.Fatalf("XDP action %d, want %d", act, want)
		}
		off := 14 + 4 + 20 + 6 // PairVLAN's egress is tagged
		if len(out) < off+2 || out[12] != 0x81 || out[13] != 0x00 {
			t.Fatalf("forwarded frame % x: want an 802.1Q tag (PairVLAN)", out)
		}
		if ck := uint16(out[off])<<8 | uint16(out[off+1]); ck != 0xffff {
			t.Fatalf("rewritten UDP checksum %#04x, want 0xffff (a computed 0 is sent as 0xffff)", ck)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	f.compare(t, []switchtest.Case{c})
}

func TestXDPMatchesGoOnMutations(t *testing.T) {
	f := newFixture(t)
	f.compare(t, switchtest.Mutations(1, 3000))
	f.compareCounters(t)
}

func (f *fixture) compareCounters(t *testing.T) {
	t.Helper()
	goPairs := map[uint32]switching.Counters{}
	f.fwd.PairCounters(func(id uint32, c switching.Counters) { goPairs[id] = c })
	n := 0
	if err := f.sw.PairCounters(func(id uint32, c switching.Counters) {
		n++
		if c != goPairs[id] {
			t.Errorf("pair %#x counters: xdp %+v, go %+v", id, c, goPairs[id])
		}
	}); err != nil {
		t.Fatal(err)
	}
	if n != len(goPairs) {
		t.Errorf("xdp has counters for %d pairs, go for %d", n, len(goPairs))
	}
	goPorts := map[string]switching.Counters{}
	f.fwd.PortCounters(func(p string, c switching.Counters) { goPorts[p] = c })
	if err := f.sw.PortCounters(func(p string, c switching.Counters) {
		if c != goPorts[p] {
			t.Errorf("port %q counters: xdp %+v, go %+v", p, c, goPorts[p])
		}
	}); err != nil {
		t.Fatal(err)
	}
}

// TestDropPPMInXDP: with DropPPM 500000 some frames of 400 are dropped and
// some forwarded (each outcome alone has probability 2^-400), and the
// counters account for every frame.
func TestDropPPMInXDP(t *testing.T) {
	f := newFixture(t)
	tb := switchtest.Table()
	tb.Version = 2
	tb.Pairs[0].DropPPM = 500_000
	frame := switchtest.Frame(switchtest.MAC(1, 1), switchtest.PortMAC(1), -1, nil, 1, switchtest.PairPlain, false)
	counts := map[uint32]int{}
	err := f.ns.Do(func() error {
		if _, err := f.sw.Reconcile(tb, f.ports); err != nil {
			return err
		}
		for i := 0; i < 400; i++ {
			act, _, err := f.sw.TestRun(frame, f.ports[switchtest.P1].Index)
			if err != nil {
				return err
			}
			counts[act]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if counts[switching.XDPDrop] == 0 || counts[switching.XDPRedirect] == 0 || counts[switching.XDPDrop]+counts[switching.XDPRedirect] != 400 {
		t.Fatalf("actions %v", counts)
	}
	f.sw.PairCounters(func(id uint32, c switching.Counters) {
		if id == switchtest.PairPlain && (c.Packets[switching.ReasonFault] != uint64(counts[switching.XDPDrop]) || c.Packets[switching.ReasonToGPU] != uint64(counts[switching.XDPRedirect])) {
			t.Errorf("counters %v/%v, actions %v", c.Packets[switching.ReasonFault], c.Packets[switching.ReasonToGPU], counts)
		}
	})
}

// TestXDPIHLBelowFive: an IPv4 header length under 20 bytes is not
// dxpu, in the program as in the Go path, even where the bytes a 16-byte
// header would make the UDP destination port read as dxpu's.
func TestXDPIHLBelowFive(t *testing.T) {
	f := newFixture(t)
	p := switchtest.Table().Pairs[1]
	port := uint16(switching.DefaultUDPPort)
	dst := netip.AddrFrom4([4]byte{10, 0, byte(port >> 8), byte(port)})
	frame := switchtest.Frame(p.Host.MAC, switchtest.PortMAC(1), -1, &encap.L3{Src: p.Host.IP, Dst: dst, SrcPort: 40000}, encap.MsgTLP, p.ID, false)
	frame[encap.EthHeaderLen] = 0x44
	f.compare(t, []switchtest.Case{{Name: "ihl4", Port: switchtest.P1, Frame: frame, Want: switching.VerdictPass, Reason: switching.ReasonNotDXPU}})
}
