package xdp_test

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/switchtest"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/xdp"
)

// Tests from hand-made bugs: each fails with a small change to the loader
// (or the program) that the older tests let through.

// loadIn loads a switch with opts, closed when the test ends.
func loadIn(t *testing.T, opts xdp.Options) *xdp.Switch {
	t.Helper()
	sw, err := xdp.Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sw.Close() })
	return sw
}

// TestLoadMaxPairsBound: MaxMaxPairs itself loads; one more is refused.
func TestLoadMaxPairsBound(t *testing.T) {
	privtest.BPF(t)
	loadIn(t, xdp.Options{MaxPairs: xdp.MaxMaxPairs})
	if sw, err := xdp.Load(xdp.Options{MaxPairs: xdp.MaxMaxPairs + 1}); err == nil {
		sw.Close()
		t.Fatalf("MaxPairs %d loaded", xdp.MaxMaxPairs+1)
	}
}

// TestAttachTwiceThenAgain: a second Attach to the same interface is
// ErrAttached; after Detach the switch attaches there again.
func TestAttachTwiceThenAgain(t *testing.T) {
	f := newFixture(t)
	idx := int(f.ports[switchtest.P1].Index)
	err := f.ns.Do(func() error {
		if _, err := f.sw.Attach(idx); err != nil {
			return err
		}
		if _, err := f.sw.Attach(idx); !errors.Is(err, xdp.ErrAttached) {
			t.Errorf("second Attach: %v, want ErrAttached", err)
		}
		if err := f.sw.Detach(idx); err != nil {
			return err
		}
		if _, err := f.sw.Attach(idx); err != nil {
			t.Errorf("Attach after Detach: %v", err)
		}
		return f.sw.Detach(idx)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSetXSKBounds: queue 64 has no slot (it would be the next port's
// queue 0); removing a socket that is not there is no error.
func TestSetXSKBounds(t *testing.T) {
	f := newFixture(t)
	idx := int(f.ports[switchtest.P1].Index)
	if err := f.sw.SetXSK(idx, xdp.XSKQueues, -1); err == nil {
		t.Errorf("SetXSK on queue %d: no error", xdp.XSKQueues)
	}
	if err := f.sw.SetXSK(idx, xdp.XSKQueues-1, -1); err != nil {
		t.Errorf("removing the socket of queue %d (none there): %v", xdp.XSKQueues-1, err)
	}
	if err := f.sw.SetXSK(idx, 0, -1); err != nil {
		t.Errorf("removing the socket of queue 0 (none there): %v", err)
	}
}

// TestReconcileRefusesShortPortMAC: a port needs a 6-byte MAC.
func TestReconcileRefusesShortPortMAC(t *testing.T) {
	f := newFixture(t)
	ports := switchtest.Ports(map[string]uint32{
		switchtest.P1: f.ports[switchtest.P1].Index, switchtest.P2: f.ports[switchtest.P2].Index, switchtest.P3: f.ports[switchtest.P3].Index})
	p := ports[switchtest.P2]
	p.MAC = p.MAC[:5]
	ports[switchtest.P2] = p
	err := f.ns.Do(func() error {
		_, err := f.sw.Reconcile(switchtest.Table(), ports)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "6-byte MAC") {
		t.Fatalf("Reconcile with a 5-byte port MAC: %v", err)
	}
}

// TestReconcileRenamesPort: a port that keeps its ifindex under a new name
// is counted under the new name.
func TestReconcileRenamesPort(t *testing.T) {
	f := newFixture(t)
	const renamed = "sw1-renamed"
	tb := switchtest.Table()
	tb.Version = 2
	for i := range tb.Pairs {
		for _, e := range []*table.Endpoint{&tb.Pairs[i].Host, &tb.Pairs[i].GPU} {
			if e.Port == switchtest.P1 {
				e.Port = renamed
			}
		}
	}
	ports := map[string]switching.Port{}
	for name, p := range f.ports {
		if name == switchtest.P1 {
			name = renamed
		}
		p.Name = name
		ports[name] = p
	}
	if err := f.ns.Do(func() error { _, err := f.sw.Reconcile(tb, ports); return err }); err != nil {
		t.Fatal(err)
	}
	var names []string
	if err := f.sw.PortCounters(func(p string, _ switching.Counters) { names = append(names, p) }); err != nil {
		t.Fatal(err)
	}
	has := map[string]bool{}
	for _, n := range names {
		has[n] = true
	}
	if !has[renamed] || has[switchtest.P1] {
		t.Fatalf("port counters under %v, want %q and not %q", names, renamed, switchtest.P1)
	}
}

func onePair(version uint64, id uint32, vlan uint16) *table.Table {
	return &table.Table{Version: version, Pairs: []table.Pair{{ID: id, VLAN: vlan,
		Host: table.Endpoint{Port: switchtest.P1, MAC: switchtest.MAC(1, 1)},
		GPU:  table.Endpoint{Port: switchtest.P2, MAC: switchtest.MAC(2, 1)}}}}
}

// TestSmallMaxPairsChangesAndLimits: with room for one pair, the pair can
// be changed again and again (each change takes a fresh slot and frees
// the old one after the quarantine); a table over the limit fails with
// ErrFull and leaves Version where it was.
func TestSmallMaxPairsChangesAndLimits(t *testing.T) {
	f := newFixture(t)
	sw := loadIn(t, xdp.Options{MaxPairs: 1})
	err := f.ns.Do(func() error {
		for v := uint64(1); v <= 5; v++ {
			if _, err := sw.Reconcile(onePair(v, 7, uint16(v)), f.ports); err != nil {
				t.Errorf("version %d (pair 7 with VLAN %d): %v", v, v, err)
			}
		}
		if sw.Version() != 5 {
			t.Errorf("Version %d after 5 reconciles", sw.Version())
		}
		over := onePair(6, 7, 5)
		for _, id := range []uint32{8, 9} {
			p := over.Pairs[0]
			p.ID = id
			p.Host.MAC, p.GPU.MAC = switchtest.MAC(1, byte(id)), switchtest.MAC(2, byte(id))
			over.Pairs = append(over.Pairs, p)
		}
		if _, err := sw.Reconcile(over, f.ports); !errors.Is(err, xdp.ErrFull) {
			t.Errorf("three pairs on room for one: %v, want ErrFull", err)
		}
		if sw.Version() != 5 {
			t.Errorf("Version %d after a failed reconcile, want 5", sw.Version())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func portCounts(sw *xdp.Switch) (map[string]switching.Counters, error) {
	m := map[string]switching.Counters{}
	err := sw.PortCounters(func(p string, c switching.Counters) { m[p] = c })
	return m, err
}

func pairCounts(sw *xdp.Switch) (map[uint32]switching.Counters, error) {
	m := map[uint32]switching.Counters{}
	err := sw.PairCounters(func(id uint32, c switching.Counters) { m[id] = c })
	return m, err
}

// TestPortSlotsRecycledClean: a port replaced hundreds of times (more than
// there are port slots) keeps reconciling, and every new port's counters
// start at zero, also in a slot an earlier port used.
func TestPortSlotsRecycledClean(t *testing.T) {
	f := newFixture(t)
	sw := loadIn(t, xdp.Options{})
	arp := make([]byte, 60)
	copy(arp, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 1, 1, 0x08, 0x06})
	idx := [2]uint32{f.ports[switchtest.P1].Index, f.ports[switchtest.P2].Index}
	err := f.ns.Do(func() error {
		for i := range 2*xdp.MaxPorts + 10 {
			p := f.ports[switchtest.P1]
			p.Name, p.Index = "churn", idx[i%2]
			if _, err := sw.Reconcile(&table.Table{Version: uint64(i + 1)}, map[string]switching.Port{"churn": p}); err != nil {
				return fmt.Errorf("reconcile %d: %w", i, err)
			}
			pc, err := portCounts(sw)
			if err != nil {
				return err
			}
			if c := pc["churn"]; c != (switching.Counters{}) {
				return fmt.Errorf("reconcile %d: the new port starts with counts %+v", i, c.Packets)
			}
			if act, _, err := sw.TestRun(arp, p.Index); err != nil || act != switching.XDPPass {
				return fmt.Errorf("ARP on the port: %d, %v", act, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPairCounterSlotsReusedClean: pairs replaced by others (more than
// there are counter slots) start counting at zero.
func TestPairCounterSlotsReusedClean(t *testing.T) {
	f := newFixture(t)
	sw := loadIn(t, xdp.Options{MaxPairs: 1})
	err := f.ns.Do(func() error {
		for i := range 5 {
			id := uint32(10 + i)
			if _, err := sw.Reconcile(onePair(uint64(i+1), id, 0), f.ports); err != nil {
				return fmt.Errorf("pair %d: %w", id, err)
			}
			pc, err := pairCounts(sw)
			if err != nil {
				return err
			}
			if c := pc[id]; c != (switching.Counters{}) {
				return fmt.Errorf("new pair %d starts with counts %+v", id, c.Packets)
			}
			frame := switchtest.Frame(switchtest.MAC(1, 1), switchtest.PortMAC(1), -1, nil, encap.MsgTLP, id, false)
			if act, _, err := sw.TestRun(frame, f.ports[switchtest.P1].Index); err != nil || act != switching.XDPRedirect {
				return fmt.Errorf("pair %d frame: %d, %v", id, act, err)
			}
			if pc, err = pairCounts(sw); err != nil {
				return err
			}
			if c := pc[id]; c.Packets[switching.ReasonToGPU] != 1 {
				return fmt.Errorf("pair %d counted %+v, want 1 to_gpu", id, c.Packets)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCountersAcrossMoveThenChange: a pair moved to other ports and then
// changed in place (same ports) keeps its port counters equal to the Go
// path's: what was counted before the move is not counted twice.
func TestCountersAcrossMoveThenChange(t *testing.T) {
	f := newFixture(t)
	p := switchtest.Table().Pairs[0]
	frame := switchtest.Frame(p.Host.MAC, switchtest.PortMAC(1), -1, nil, encap.MsgTLP, p.ID, false)
	cases := []switchtest.Case{{Name: "pair1 host->gpu", Port: switchtest.P1, Frame: frame, Want: 255}}
	moved := switchtest.Table()
	moved.Version = 2
	moved.Pairs[0].GPU.Port = switchtest.P3
	changed := switchtest.Table()
	changed.Version = 3
	changed.Pairs[0].GPU.Port = switchtest.P3
	changed.Pairs[0].VLAN = 9
	f.compare(t, cases)
	for _, tb := range []*table.Table{moved, changed} {
		if err := f.ns.Do(func() error {
			if _, err := f.sw.Reconcile(tb, f.ports); err != nil {
				return err
			}
			rules, _, err := switching.Compile(tb, f.ports, 0)
			if err != nil {
				return err
			}
			f.fwd.Update(rules)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		f.compare(t, cases)
		f.compareCounters(t)
	}
}

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

// TestXDPJumboFrameCounted: a forwarded frame larger than a page
// (multi-buffer) counts with all its bytes, as in the Go path.
func TestXDPJumboFrameCounted(t *testing.T) {
	f := newFixture(t)
	p := switchtest.Table().Pairs[0]
	frame := switchtest.Frame(p.Host.MAC, switchtest.PortMAC(1), -1, nil, encap.MsgTLP, p.ID, false)
	frame = append(frame, make([]byte, 9000-len(frame))...)
	f.compare(t, []switchtest.Case{{Name: "jumbo", Port: switchtest.P1, Frame: frame, Want: switching.VerdictForward, Reason: switching.ReasonToGPU}})
	f.compareCounters(t)
	pc, err := pairCounts(f.sw)
	if err != nil {
		t.Fatal(err)
	}
	if c := pc[p.ID]; c.Bytes[switching.ReasonToGPU] != uint64(len(frame)) {
		t.Fatalf("pair counted %d bytes to_gpu, want %d", c.Bytes[switching.ReasonToGPU], len(frame))
	}
}
