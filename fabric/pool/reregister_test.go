package pool

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func regBox(id string, e Endpoint, agent string) Box {
	return Box{ID: id, Bridge: e, AgentURL: agent, GPUs: []GPU{
		{ID: id + "-g0", Model: "H100", MemoryMiB: 81920, BDF: "0000:18:00.0", Switch: 1, Port: 2},
		{ID: id + "-g1", Model: "H100", MemoryMiB: 81920, BDF: "0000:19:00.0", Switch: 1, Port: 3},
	}}
}

func regHost(id string, e Endpoint, agent string) Host {
	return Host{ID: id, Bridge: e, AgentURL: agent, Ports: MinHostPorts}
}

var (
	epBox  = Endpoint{SwitchPort: "eth3", MAC: "02:00:00:00:07:00", IP: "10.1.0.7", UDPPort: 4791}
	epHost = Endpoint{SwitchPort: "eth1", MAC: "02:00:00:00:02:01", IP: "10.2.0.1", UDPPort: 4791}
)

// lentPool has box b (agent https://b) with b-g0 lent to allocation a of
// host h (agent https://h).
func lentPool(t *testing.T) *Pool {
	t.Helper()
	p := New()
	if _, err := p.AddBox(regBox("b", epBox, "https://b:7701")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AddHost(regHost("h", epHost, "https://h:7701")); err != nil {
		t.Fatal(err)
	}
	a, err := p.Reserve("a", Request{Host: "h", Count: 1})
	if err != nil || a.GPUs[0].GPU != "b-g0" {
		t.Fatalf("%+v %v", a, err)
	}
	return p
}

// TestLentBridgeKeepsItsEndpoint repeats the attack "re-registering a host
// or box whose GPUs are lent with a new MAC and switch port returns 200":
// every change of endpoint or agent URL is refused (ErrInUse naming the lent
// GPUs and allocation) and the pool is left as it was.
func TestLentBridgeKeepsItsEndpoint(t *testing.T) {
	t.Parallel()
	moves := map[string]func(e *Endpoint, agent *string){
		"mac and switch port": func(e *Endpoint, _ *string) { e.MAC, e.SwitchPort = "02:66:66:66:66:66", "eth9" },
		"switch port":         func(e *Endpoint, _ *string) { e.SwitchPort = "eth9" },
		"mac":                 func(e *Endpoint, _ *string) { e.MAC = "02:66:66:66:66:66" },
		"ip":                  func(e *Endpoint, _ *string) { e.IP = "10.9.9.9" },
		"udp port":            func(e *Endpoint, _ *string) { e.UDPPort = 4792 },
		"agent url":           func(_ *Endpoint, a *string) { *a = "https://evil:7701" },
	}
	for name, move := range moves {
		p := lentPool(t)
		beforeBox, _ := p.Box("b")
		beforeHost, _ := p.Host("h")

		nb := regBox("b", epBox, "https://b:7701")
		move(&nb.Bridge, &nb.AgentURL)
		_, err := p.AddBox(nb)
		if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "b-g0") || !strings.Contains(err.Error(), "allocations a") {
			t.Errorf("box, %s changed: %v, want ErrInUse naming b-g0 and allocation a", name, err)
		}
		nh := regHost("h", epHost, "https://h:7701")
		move(&nh.Bridge, &nh.AgentURL)
		_, err = p.AddHost(nh)
		if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "allocations a") {
			t.Errorf("host, %s changed: %v, want ErrInUse naming allocation a", name, err)
		}
		afterBox, _ := p.Box("b")
		afterHost, _ := p.Host("h")
		if !reflect.DeepEqual(beforeBox, afterBox) || !reflect.DeepEqual(beforeHost, afterHost) {
			t.Errorf("%s: a refused re-registration changed the pool", name)
		}
		check(t, p)
	}
	// The same endpoint, the MAC written another way, is no move.
	p := lentPool(t)
	same := regBox("b", epBox, "https://b:7701")
	same.Bridge.MAC = "02-00-00-00-07-00"
	if _, err := p.AddBox(same); err != nil {
		t.Fatalf("re-registering unchanged: %v", err)
	}
	if _, err := p.AddHost(regHost("h", epHost, "https://h:7701")); err != nil {
		t.Fatalf("re-registering unchanged: %v", err)
	}
	// Once nothing is lent the bridge may move.
	p.Remove("a")
	moved := regBox("b", Endpoint{SwitchPort: "eth9", MAC: "02:00:00:00:09:00"}, "https://b2:7701")
	if _, err := p.AddBox(moved); err != nil {
		t.Fatalf("moving a box with nothing lent: %v", err)
	}
	if _, err := p.AddHost(regHost("h", Endpoint{SwitchPort: "eth8", MAC: "02:00:00:00:08:00"}, "")); err != nil {
		t.Fatalf("moving a host with nothing lent: %v", err)
	}
	check(t, p)
}

// TestLentGPUKeepsItsFields repeats the attack "lent GPUs' memory_mib is
// reset to 0": a field left out keeps its value, a different one is
// refused; a free GPU may change.
func TestLentGPUKeepsItsFields(t *testing.T) {
	t.Parallel()
	p := lentPool(t)
	sparse := regBox("b", epBox, "https://b:7701")
	sparse.GPUs[0] = GPU{ID: "b-g0", Model: "H100"} // memory, BDF, position left out
	sparse.GPUs[1].MemoryMiB = 40960                // b-g1 is free: it may change
	got, err := p.AddBox(sparse)
	if err != nil {
		t.Fatal(err)
	}
	g0, _ := p.GPU("b-g0")
	if g0.MemoryMiB != 81920 || g0.BDF != "0000:18:00.0" || g0.Switch != 1 || g0.Port != 2 || g0.Allocation != "a" {
		t.Fatalf("lent GPU after a sparse re-registration: %+v", g0)
	}
	if got.GPUs[1].MemoryMiB != 40960 {
		t.Fatalf("free GPU kept its old memory: %+v", got.GPUs[1])
	}
	if sparse.GPUs[0].MemoryMiB != 0 {
		t.Fatal("AddBox wrote into the caller's GPUs")
	}
	for field, change := range map[string]func(g *GPU){
		"memory_mib":  func(g *GPU) { g.MemoryMiB = 1 },
		"model":       func(g *GPU) { g.Model = "A100" },
		"bdf":         func(g *GPU) { g.BDF = "0000:99:00.0" },
		"pcie_switch": func(g *GPU) { g.Switch = 3 },
	} {
		nb := regBox("b", epBox, "https://b:7701")
		change(&nb.GPUs[0])
		_, err := p.AddBox(nb)
		if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "b-g0") || !strings.Contains(err.Error(), field) {
			t.Errorf("changing lent %s: %v, want ErrInUse naming b-g0 and %s", field, err, field)
		}
	}
	if now, _ := p.GPU("b-g0"); !reflect.DeepEqual(now, g0) {
		t.Fatalf("refused re-registrations changed the lent GPU: %+v", now)
	}
	check(t, p)
}

// TestEndpointsDoNotClash repeats the attack "a host bridge and a box
// bridge (or two boxes) with the same switch port and MAC are accepted":
// each is refused with ErrConflict naming the bridge that has it.
func TestEndpointsDoNotClash(t *testing.T) {
	t.Parallel()
	p := New()
	if _, err := p.AddBox(regBox("b1", epBox, "")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AddHost(regHost("h1", epHost, "")); err != nil {
		t.Fatal(err)
	}
	portMAC := Endpoint{SwitchPort: epBox.SwitchPort, MAC: "02:00:00:00:07:00"}
	ipUDP := Endpoint{SwitchPort: "eth7", MAC: "02:00:00:00:77:77", IP: epHost.IP, UDPPort: epHost.UDPPort}
	refused := []struct {
		name  string
		add   func() error
		owner string
	}{
		{"box with a box's port and mac", func() error { _, err := p.AddBox(regBox("b2", portMAC, "")); return err }, `box "b1"`},
		{"host with a box's port and mac", func() error { _, err := p.AddHost(regHost("h2", portMAC, "")); return err }, `box "b1"`},
		{"box with a host's ip:udp", func() error { _, err := p.AddBox(regBox("b2", ipUDP, "")); return err }, `host "h1"`},
		{"host with a host's ip:udp", func() error { _, err := p.AddHost(regHost("h2", ipUDP, "")); return err }, `host "h1"`},
		{"existing host moving onto a box", func() error { _, err := p.AddHost(regHost("h1", portMAC, "")); return err }, `box "b1"`},
	}
	for _, r := range refused {
		err := r.add()
		if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), r.owner) {
			t.Errorf("%s: %v, want ErrConflict naming %s", r.name, err, r.owner)
		}
	}
	if s := p.Stats(); s.Boxes != 1 || s.Hosts != 1 {
		t.Fatalf("refused registrations were added: %+v", s)
	}
	// Sharing only a MAC (another port), only a port, or only an IP (another
	// UDP port) is no clash; a bridge re-registering keeps its own.
	ok := []Endpoint{
		{SwitchPort: "eth5", MAC: epBox.MAC},
		{SwitchPort: epBox.SwitchPort, MAC: "02:00:00:00:05:05"},
		{SwitchPort: "eth6", MAC: "02:00:00:00:06:06", IP: epHost.IP, UDPPort: 4800},
	}
	for i, e := range ok {
		if _, err := p.AddHost(regHost("ok"+string(rune('0'+i)), e, "")); err != nil {
			t.Errorf("endpoint %v: %v", e, err)
		}
	}
	if _, err := p.AddBox(regBox("b1", epBox, "")); err != nil {
		t.Fatalf("re-registering b1 as it is: %v", err)
	}
	check(t, p)
}
