package xdp_test

import (
	"fmt"
	"net"
	"testing"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/internal/switchtest"
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
