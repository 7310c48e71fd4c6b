package manager

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/fabric/table"
)

// tableState is the versioned forwarding table the switch follows. Its
// version starts at the wall clock in microseconds when a manager takes the
// lead, so a watcher never mistakes a new leader's table for the one it has.
type tableState struct {
	mu      sync.Mutex
	version uint64
	pairs   map[uint32]table.Pair
	changed chan struct{} // closed and replaced on every change
}

func newTableState() *tableState {
	return &tableState{pairs: map[uint32]table.Pair{}, changed: make(chan struct{}), version: uint64(time.Now().UnixMicro())}
}

func endpoint(e pool.Endpoint) (table.Endpoint, error) {
	mac, err := net.ParseMAC(e.MAC)
	if err != nil {
		return table.Endpoint{}, fmt.Errorf("mac %q: %w", e.MAC, err)
	}
	out := table.Endpoint{Port: e.SwitchPort, MAC: mac, UDPPort: e.UDPPort}
	if e.IP != "" {
		if out.IP, err = netip.ParseAddr(e.IP); err != nil {
			return table.Endpoint{}, fmt.Errorf("ip %q: %w", e.IP, err)
		}
	}
	return out, nil
}

func tablePair(p Pair) (table.Pair, error) {
	h, err := endpoint(p.HostBridge)
	if err != nil {
		return table.Pair{}, fmt.Errorf("pair %d host: %w", p.ID, err)
	}
	g, err := endpoint(p.GPUBridge)
	if err != nil {
		return table.Pair{}, fmt.Errorf("pair %d gpu: %w", p.ID, err)
	}
	return table.Pair{ID: p.ID, Host: h, GPU: g}, nil
}

func (t *tableState) bump() {
	t.version++
	close(t.changed)
	t.changed = make(chan struct{})
}

// ProgramPair makes tableState a SwitchProgrammer.
func (t *tableState) ProgramPair(_ context.Context, p Pair) error {
	tp, err := tablePair(p)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.pairs[p.ID]; ok && samePair(old, tp) {
		return nil
	}
	t.pairs[p.ID] = tp
	t.bump()
	return nil
}

func samePair(a, b table.Pair) bool {
	eq := func(x, y table.Endpoint) bool {
		return x.Port == y.Port && slices.Equal(x.MAC, y.MAC) && x.IP == y.IP && x.UDPPort == y.UDPPort
	}
	return a.ID == b.ID && eq(a.Host, b.Host) && eq(a.GPU, b.GPU) && a.VLAN == b.VLAN && a.DropPPM == b.DropPPM
}

func (t *tableState) RemovePair(_ context.Context, p Pair) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.pairs[p.ID]; !ok {
		return nil
	}
	delete(t.pairs, p.ID)
	t.bump()
	return nil
}

// load replaces the table with pairs in one change (one new version). It
// returns an error for each pair whose endpoints do not convert; those are
// left out.
func (t *tableState) load(pairs []Pair) []error {
	var errs []error
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.pairs)
	for _, p := range pairs {
		tp, err := tablePair(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		t.pairs[p.ID] = tp
	}
	if now := uint64(time.Now().UnixMicro()); now > t.version {
		t.version = now
	}
	t.bump()
	return errs
}

// loadTable fills the forwarding table with every active allocation's
// pairs from p. A manager taking the lead calls it before it answers as
// leader: a switch following the new leader must never be served an empty
// table (it would empty its map and cut every pair) while the reconcile
// pass reaches the switch step pair by pair.
func (m *Manager) loadTable(p *pool.Pool) {
	var pairs []Pair
	for _, a := range p.Allocations() {
		if a.State != pool.StateActive {
			continue
		}
		ps, err := m.pairsOf(p, a)
		if err != nil {
			m.log.Warn("forwarding table: allocation left out", "id", a.ID, "err", err)
			continue
		}
		pairs = append(pairs, ps...)
	}
	for _, err := range m.table.load(pairs) {
		m.log.Warn("forwarding table: pair left out", "err", err)
	}
}

// reset empties the table (on losing leadership).
func (t *tableState) reset() { t.load(nil) }

// snapshot returns the table and a channel closed at its next change.
func (t *tableState) snapshot() (table.Table, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := table.Table{Version: t.version, Pairs: make([]table.Pair, 0, len(t.pairs))}
	for _, p := range t.pairs {
		out.Pairs = append(out.Pairs, p)
	}
	slices.SortFunc(out.Pairs, func(a, b table.Pair) int { return int(a.ID) - int(b.ID) })
	return out, t.changed
}

// wait returns the table once its version differs from version, or when ctx
// ends (then with the current table).
func (t *tableState) wait(ctx context.Context, version uint64) table.Table {
	for {
		tab, changed := t.snapshot()
		if tab.Version != version {
			return tab
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return tab
		}
	}
}
