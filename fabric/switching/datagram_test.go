package switching_test

import (
	"net/netip"
	"testing"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/internal/switchtest"
	"github.com/dxpu/dxpu/tlp/encap"
)

// TestForwardDatagramEdges: the UDP-socket switch refuses a payload one
// byte short of a dxpu header, drops what goes to an endpoint without an
// IP (no_room), accepts an endpoint without a UDP port from 8855, and
// counts both directions on its port.
func TestForwardDatagramEdges(t *testing.T) {
	tbl := &table.Table{Version: 1, Pairs: []table.Pair{
		{ID: 5,
			Host: table.Endpoint{Port: "udp", MAC: switchtest.MAC(1, 1), IP: netip.MustParseAddr("10.0.0.1")},
			GPU:  table.Endpoint{Port: "udp", MAC: switchtest.MAC(2, 1), IP: netip.MustParseAddr("10.0.0.2"), UDPPort: 9000}},
		{ID: 6,
			Host: table.Endpoint{Port: "udp", MAC: switchtest.MAC(1, 2), IP: netip.MustParseAddr("10.0.0.3"), UDPPort: 9001},
			GPU:  table.Endpoint{Port: "udp", MAC: switchtest.MAC(2, 2)}},
	}}
	ports := switching.SyntheticPorts([]string{"udp"})
	rules, _, err := switching.Compile(tbl, ports, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := switching.NewForwarder(0)
	f.SetPorts(ports)
	f.Update(rules)
	msg := func(id uint32, n int) []byte {
		b := make([]byte, n)
		encap.Header(b).SetVersionFlags(1, 0)
		encap.Header(b).SetType(encap.MsgTLP)
		encap.Header(b).SetPairID(id)
		return b
	}
	hostAt := netip.MustParseAddrPort("10.0.0.1:8855")
	if _, r := f.ForwardDatagram(msg(5, encap.HeaderLen-1), hostAt, switching.UDPIndex); r.Verdict != switching.VerdictDrop || r.Reason != switching.ReasonMalformed {
		t.Errorf("%d-byte payload: %v/%v, want drop/malformed", encap.HeaderLen-1, r.Verdict, r.Reason)
	}
	to, r := f.ForwardDatagram(msg(5, 48), hostAt, switching.UDPIndex)
	if r.Verdict != switching.VerdictForward || to != netip.MustParseAddrPort("10.0.0.2:9000") {
		t.Fatalf("host without udp_port, from port 8855: %v/%v to %v, want forward to 10.0.0.2:9000", r.Verdict, r.Reason, to)
	}
	if to, r := f.ForwardDatagram(msg(6, 48), netip.MustParseAddrPort("10.0.0.3:9001"), switching.UDPIndex); r.Verdict != switching.VerdictDrop || r.Reason != switching.ReasonNoRoom {
		t.Errorf("to a GPU without IP: %v/%v to %v, want drop/no_room", r.Verdict, r.Reason, to)
	}
	c := portCountersByName(f)["udp"]
	if c.Packets[switching.ReasonToGPU] != 1 || c.Packets[switching.ReasonTxToGPU] != 1 || c.Bytes[switching.ReasonTxToGPU] != 48 {
		t.Errorf("port udp counters %+v, want one to_gpu and one tx_to_gpu of 48 bytes", c)
	}
}
