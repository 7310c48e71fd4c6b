package xdp

import (
	"testing"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/internal/switchtest"
	"github.com/dxpu/dxpu/tlp/encap"
)

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
