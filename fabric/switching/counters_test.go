package switching_test

import (
	"testing"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/internal/switchtest"
	"github.com/dxpu/dxpu/tlp/encap"
)

func portCountersByName(f *switching.Forwarder) map[string]switching.Counters {
	m := map[string]switching.Counters{}
	f.PortCounters(func(p string, c switching.Counters) { m[p] = c })
	return m
}

func pairCountersByID(f switching.CounterSource) map[uint32]switching.Counters {
	m := map[uint32]switching.Counters{}
	f.PairCounters(func(id uint32, c switching.Counters) { m[id] = c })
	return m
}

// TestPortCountersByDirection: a forwarded frame counts as received on its
// ingress port (to_gpu/to_host, its size on arrival) and as transmitted on
// its egress port (tx_*, its size as sent, a pushed tag included), whether
// the ports were set before or after the rules.
func TestPortCountersByDirection(t *testing.T) {
	ports := switchtest.Ports(testIndex)
	rules, _, err := switching.Compile(switchtest.Table(), ports, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, order := range []string{"ports first", "rules first"} {
		f := switching.NewForwarder(0)
		if order == "ports first" {
			f.SetPorts(ports)
			f.Update(rules)
		} else {
			f.Update(rules)
			f.SetPorts(ports)
		}
		p := switchtest.Table().Pairs[1] // VLAN 100 on egress: an untagged frame grows by 4
		toGPU := switchtest.Frame(p.Host.MAC, switchtest.PortMAC(1), -1, nil, encap.MsgTLP, p.ID, false)
		toHost := append(switchtest.Frame(p.GPU.MAC, switchtest.PortMAC(2), -1, nil, encap.MsgTLP, p.ID, false), 0, 0, 0)
		r1, out1 := forward(f, toGPU, p.Host.Port)
		r2, out2 := forward(f, toHost, p.GPU.Port)
		if r1.Reason != switching.ReasonToGPU || r2.Reason != switching.ReasonToHost || len(out1) != len(toGPU)+4 || len(out2) != len(toHost)+4 {
			t.Fatalf("%s: fixture: %v %v, %d -> %d bytes", order, r1.Reason, r2.Reason, len(toGPU), len(out1))
		}
		got := portCountersByName(f)
		want := map[string]switching.Counters{}
		add := func(port string, r switching.Reason, n int) {
			c := want[port]
			c.Add(r, n)
			want[port] = c
		}
		add(p.Host.Port, switching.ReasonToGPU, len(toGPU))
		add(p.GPU.Port, switching.ReasonTxToGPU, len(out1))
		add(p.GPU.Port, switching.ReasonToHost, len(toHost))
		add(p.Host.Port, switching.ReasonTxToHost, len(out2))
		for _, name := range []string{"", switchtest.P1, switchtest.P2, switchtest.P3} {
			if got[name] != want[name] {
				t.Errorf("%s: port %q counters\n%+v\nwant\n%+v", order, name, got[name], want[name])
			}
		}
	}
}

// TestCountersKeptAcrossUpdates: a new table or new ports keep the
// counters of the pairs and ports that stay; a removed pair's go.
func TestCountersKeptAcrossUpdates(t *testing.T) {
	f, ports := newForwarder(t)
	host := switchtest.Table().Pairs[0].Host
	frame := switchtest.Frame(host.MAC, switchtest.PortMAC(1), -1, nil, encap.MsgTLP, switchtest.PairPlain, false)
	forward(f, frame, switchtest.P1)
	rules, _, _ := switching.Compile(switchtest.Table(), ports, 0)
	f.Update(rules)
	f.SetPorts(ports)
	forward(f, frame, switchtest.P1)
	if c := pairCountersByID(f)[switchtest.PairPlain]; c.Packets[switching.ReasonToGPU] != 2 {
		t.Errorf("pair counters after Update: %+v, want 2 frames to_gpu", c.Packets)
	}
	if c := portCountersByName(f)[switchtest.P1]; c.Packets[switching.ReasonToGPU] != 2 {
		t.Errorf("port %s counters after SetPorts: %+v, want 2 frames to_gpu", switchtest.P1, c.Packets)
	}
	tb := switchtest.Table()
	tb.Pairs = tb.Pairs[1:]
	rules, _, _ = switching.Compile(tb, ports, 0)
	f.Update(rules)
	if _, ok := pairCountersByID(f)[switchtest.PairPlain]; ok {
		t.Error("a removed pair's counters are still exported")
	}
}

// TestUnmanagedPortCounted: frames on an interface that is no port of the
// switch count under port "".
func TestUnmanagedPortCounted(t *testing.T) {
	f, _ := newForwarder(t)
	arp := make([]byte, 60)
	copy(arp, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 1, 1, 0x08, 0x06})
	buf := append(make([]byte, switching.Headroom), arp...)
	if r := f.Forward(buf, switching.Headroom, 99); r.Verdict != switching.VerdictPass {
		t.Fatalf("ARP: %v", r.Verdict)
	}
	if c := portCountersByName(f)[""]; c.Packets[switching.ReasonNotDXPU] != 1 || c.Bytes[switching.ReasonNotDXPU] != 60 {
		t.Fatalf("unmanaged port counters %+v, want 1 not_dxpu frame of 60 bytes", c)
	}
}

// TestSumSourcesAdds: the sum of two sources adds their counters.
func TestSumSourcesAdds(t *testing.T) {
	a, _ := newForwarder(t)
	b, _ := newForwarder(t)
	host := switchtest.Table().Pairs[0].Host
	frame := switchtest.Frame(host.MAC, switchtest.PortMAC(1), -1, nil, encap.MsgTLP, switchtest.PairPlain, false)
	forward(a, frame, switchtest.P1)
	forward(b, frame, switchtest.P1)
	forward(b, frame, switchtest.P1)
	sum := switching.SumSources{a, b}
	if c := pairCountersByID(sum)[switchtest.PairPlain]; c.Packets[switching.ReasonToGPU] != 3 || c.Bytes[switching.ReasonToGPU] != uint64(3*len(frame)) {
		t.Errorf("summed pair counters %+v, want 3 frames", c)
	}
	ports := map[string]switching.Counters{}
	sum.PortCounters(func(p string, c switching.Counters) { ports[p] = c })
	if c := ports[switchtest.P1]; c.Packets[switching.ReasonToGPU] != 3 {
		t.Errorf("summed port counters %+v, want 3 frames", c)
	}
}
