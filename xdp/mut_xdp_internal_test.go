package xdp

import (
	"testing"
	"time"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/switchtest"
	"github.com/dxpu/dxpu/tlp/encap"
)

// A slot retired a moment ago stays out of use while free ones remain.
func TestSlotPoolKeepsRetiredWhileFreeRemain(t *testing.T) {
	now := time.Unix(0, 0)
	p := newSlotPool(0, 3)
	p.now = func() time.Time { return now }
	p.sleep = func(d time.Duration) { now = now.Add(d) }
	a, _ := p.get()
	p.get()
	p.retire(a)
	if s, err := p.get(); err != nil || s == a {
		t.Fatalf("got slot %d (%v) with slot %d just retired and slot 2 free; want 2", s, err, a)
	}
	now = now.Add(quarantine)
	if s, err := p.get(); err != nil || s != a {
		t.Fatalf("after the quarantine: slot %d (%v), want %d", s, err, a)
	}
}

// A removed pair's rule slot is not handed to the pair added in its place
// before the quarantine: a program run may still read it.
func TestRemovedPairSlotQuarantined(t *testing.T) {
	privtest.BPF(t)
	privtest.NetNS(t)
	sb, err := NewSandbox([]PortSpec{{Name: "h", MAC: switchtest.MAC(9, 1)}, {Name: "g", MAC: switchtest.MAC(9, 2)}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	pair := func(id uint32) *table.Table {
		return &table.Table{Version: uint64(id), Pairs: []table.Pair{{ID: id,
			Host: table.Endpoint{Port: "h", MAC: switchtest.MAC(1, 1)}, GPU: table.Endpoint{Port: "g", MAC: switchtest.MAC(2, 1)}}}}
	}
	err = sb.Do(func() error {
		s, err := Load(Options{MaxPairs: 2})
		if err != nil {
			return err
		}
		defer s.Close()
		if _, err := s.Reconcile(pair(1), sb.Ports()); err != nil {
			return err
		}
		old := s.pairs[1].slot
		if _, err := s.Reconcile(pair(2), sb.Ports()); err != nil {
			return err
		}
		if got := s.pairs[2].slot; got == old {
			t.Errorf("pair 2 got slot %d, pair 1's, right after pair 1 was removed", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The slow path ignores a malformed dxpu frame (the fast path counted
// it): Observe does not see it. A CONTROL message it forwards, it does.
func TestSlowPathIgnoresMalformed(t *testing.T) {
	index := map[string]uint32{switchtest.P1: 11, switchtest.P2: 12, switchtest.P3: 13}
	ports := switchtest.Ports(index)
	rules, _, err := switching.Compile(switchtest.Table(), ports, 0)
	if err != nil {
		t.Fatal(err)
	}
	fwd := switching.NewForwarder(0)
	fwd.SetPorts(ports)
	fwd.Update(rules)
	var seen []string
	s := &SlowPath{fwd: fwd, ports: ports, tx: map[uint32]*switching.PacketSocket{},
		Observe: func(port string, _ []byte) { seen = append(seen, port) }}
	host := switchtest.Table().Pairs[0].Host
	good := switchtest.Frame(host.MAC, switchtest.PortMAC(1), -1, nil, encap.MsgControl, switchtest.PairPlain, false)
	short := append([]byte(nil), good[:encap.EthHeaderLen+20]...)
	s.handle(switchtest.P1, append(make([]byte, 4), short...), 4)
	if len(seen) != 0 {
		t.Fatalf("Observe saw a malformed frame on %v", seen)
	}
	s.handle(switchtest.P1, append(make([]byte, 4), good...), 4)
	if len(seen) != 1 {
		t.Fatalf("Observe saw %d frames, want the CONTROL message", len(seen))
	}
}
