package xdp_test

import (
	"fmt"
	"testing"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/internal/switchtest"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/xdp"
)

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
