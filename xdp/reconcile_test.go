package xdp_test

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/internal/switchtest"
	"github.com/dxpu/dxpu/xdp"
)

// TestReconcileSequence applies a sequence of tables (pairs added, changed
// in place, moved to other ports, removed, re-added) to the XDP maps and to
// the Go forwarder, replaying the corpus after each, and checks that both
// agree on every frame and on every counter: removed pairs must stop
// forwarding at once and their counts must stay attributed to the ports.
func TestReconcileSequence(t *testing.T) {
	f := newFixture(t)
	base := switchtest.Table()
	moved := switchtest.Table()
	moved.Version = 3
	moved.Pairs[0].GPU.Port = switchtest.P3 // pair 1 now reaches its GPU through P3
	moved.Pairs[1].GPU.MAC = net.HardwareAddr{2, 0, 0, 0, 7, 7}
	shrunk := &table.Table{Version: 4, Pairs: []table.Pair{base.Pairs[2]}}
	steps := []*table.Table{
		{Version: 2, Pairs: base.Pairs[1:]}, // pair 1 removed
		moved,                               // back, on other ports; pair 2 changed
		shrunk,                              // only 0x123456 left
		{Version: 5},                        // empty
		base,                                // everything back
	}
	cases := switchtest.Corpus()
	for i, tb := range steps {
		err := f.ns.Do(func() error {
			if _, err := f.sw.Reconcile(tb, f.ports); err != nil {
				return err
			}
			rules, _, err := switching.Compile(tb, f.ports, 0)
			if err != nil {
				return err
			}
			f.fwd.Update(rules)
			return nil
		})
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		t.Run(fmt.Sprintf("step%d", i), func(t *testing.T) {
			// Verdicts may differ from the corpus' expectations now:
			// compare the two paths only.
			var cs []switchtest.Case
			for _, c := range cases {
				c.Want = 255
				cs = append(cs, c)
			}
			f.compare(t, cs)
			f.compareCounters(t)
		})
	}
}

func onePair(version uint64, id uint32, vlan uint16) *table.Table {
	return &table.Table{Version: version, Pairs: []table.Pair{{ID: id, VLAN: vlan,
		Host: table.Endpoint{Port: switchtest.P1, MAC: switchtest.MAC(1, 1)},
		GPU:  table.Endpoint{Port: switchtest.P2, MAC: switchtest.MAC(2, 1)}}}}
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
