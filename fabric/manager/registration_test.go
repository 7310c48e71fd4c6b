package manager_test

import (
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/fabric/store"
	"github.com/dxpu/dxpu/internal/fakeagent"
)

// TestReRegisteringALentBridgeIsRefused repeats the attack: a host and a
// box whose GPUs are lent re-register with a new MAC and switch port. Each
// is 409 in_use naming the lent GPUs and allocation; the live table keeps
// the endpoints, and so does a manager restarted on the same store. A
// re-registration that leaves out memory_mib keeps the lent GPU's memory.
func TestReRegisteringALentBridgeIsRefused(t *testing.T) {
	t.Parallel()
	st := store.NewMemory()
	e := newEnv(t, st)
	seed(t, e.c, 1, 2, 1)
	a, err := e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	lent := a.GPUs[0].GPU
	before, _ := e.c.Table(e.ctx)

	movedBox := testBox(0, 2)
	movedBox.Bridge.MAC, movedBox.Bridge.SwitchPort = "02:66:66:66:66:01", "veth-evil"
	movedHost := testHost(0)
	movedHost.Bridge.MAC, movedHost.Bridge.SwitchPort = "02:66:66:66:66:02", "veth-evil2"
	for name, tc := range map[string]struct {
		register func() error
		names    []string
	}{
		"box":  {func() error { _, err := e.c.RegisterBox(e.ctx, movedBox); return err }, []string{a.ID, lent}},
		"host": {func() error { _, err := e.c.RegisterHost(e.ctx, movedHost); return err }, []string{a.ID}},
	} {
		err := tc.register()
		var ae *ctlclient.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Code != manager.CodeInUse {
			t.Errorf("re-registering the %s with a new endpoint: %v, want 409 in_use", name, err)
			continue
		}
		for _, n := range tc.names {
			if !strings.Contains(ae.Message, n) {
				t.Errorf("the %s's refusal %q does not name %s", name, ae.Message, n)
			}
		}
	}
	sparse := testBox(0, 2)
	for i := range sparse.GPUs {
		sparse.GPUs[i].MemoryMiB = 0
	}
	if _, err := e.c.RegisterBox(e.ctx, sparse); err != nil {
		t.Fatal(err)
	}
	if g, _ := e.c.Boxes(e.ctx); g[0].GPUs[0].MemoryMiB != 80<<10 || g[0].GPUs[0].Allocation != a.ID {
		t.Fatalf("lent GPU after a registration without memory_mib: %+v", g[0].GPUs[0])
	}
	after, _ := e.c.Table(e.ctx)
	if !reflect.DeepEqual(before.Pairs, after.Pairs) {
		t.Fatalf("table changed: %+v -> %+v", before.Pairs, after.Pairs)
	}
	e.agree()
	// A restart routes the pair where it went before.
	e.srv.Close()
	e.m.Close()
	e2 := &env{t: t, st: st, gpu: fakeagent.New("gpu"), sw: fakeagent.New("switch"), host: fakeagent.New("host"), ctx: e.ctx}
	e2.start()
	restarted, _ := e2.c.Table(e.ctx)
	if !reflect.DeepEqual(before.Pairs, restarted.Pairs) {
		t.Fatalf("after restart the table routes %+v, before %+v", restarted.Pairs, before.Pairs)
	}
	if g, _ := e2.c.Boxes(e.ctx); g[0].GPUs[0].MemoryMiB != 80<<10 {
		t.Fatalf("lent GPU lost its memory in the store: %+v", g[0].GPUs[0])
	}
}

// TestClashingEndpointsAreRefused repeats the attack: a host bridge (or a
// second box) registers with a box's switch port and MAC, or a host's IP
// and UDP port: 409 conflict naming the bridge that has it.
func TestClashingEndpointsAreRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	seed(t, e.c, 1, 2, 1)
	h := testHost(5)
	h.Bridge.SwitchPort, h.Bridge.MAC = testBox(0, 0).Bridge.SwitchPort, testBox(0, 0).Bridge.MAC
	b := testBox(5, 1)
	b.Bridge.SwitchPort, b.Bridge.MAC = testBox(0, 0).Bridge.SwitchPort, testBox(0, 0).Bridge.MAC
	b2 := testBox(6, 1)
	b2.Bridge.IP, b2.Bridge.UDPPort = testHost(0).Bridge.IP, testHost(0).Bridge.UDPPort
	for name, tc := range map[string]struct {
		register func() error
		owner    string
	}{
		"host on box0's port and mac": {func() error { _, err := e.c.RegisterHost(e.ctx, h); return err }, `box "box0"`},
		"box on box0's port and mac":  {func() error { _, err := e.c.RegisterBox(e.ctx, b); return err }, `box "box0"`},
		"box on host0's ip:udp":       {func() error { _, err := e.c.RegisterBox(e.ctx, b2); return err }, `host "host0"`},
	} {
		err := tc.register()
		var ae *ctlclient.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Code != manager.CodeConflict || !strings.Contains(ae.Message, tc.owner) {
			t.Errorf("%s: %v, want 409 conflict naming %s", name, err, tc.owner)
		}
	}
	if s, _ := e.c.Stats(e.ctx); s.Boxes != 1 || s.Hosts != 1 {
		t.Fatalf("clashing bridges were registered: %+v", s)
	}
}

// TestAgentBridgeNeedsIP: a box or host registered with an agent_url is
// driven by dxpu bridge agent, which speaks UDP only: without bridge.ip
// it is 400 invalid_argument naming the field, and nothing is registered
// (the table got a pair with no IP, whose traffic a UDP switch dropped).
// So is bridge.ip 0.0.0.0. udp_port may be left out (8855); without an agent_url, bridge.ip stays
// optional (a raw-Ethernet bridge behind an XDP switch has none).
func TestAgentBridgeNeedsIP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	box, host := testBox(0, 1), testHost(0)
	box.AgentURL, host.AgentURL = "https://10.1.0.1:7701", "https://10.2.0.1:7701"
	box.Bridge.IP, host.Bridge.IP = "", ""
	for name, register := range map[string]func() error{
		"box":  func() error { _, _, err := e.c.RegisterBoxAgent(e.ctx, box); return err },
		"host": func() error { _, _, err := e.c.RegisterHostAgent(e.ctx, host); return err },
	} {
		err := register()
		var ae *ctlclient.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Code != manager.CodeInvalid || !strings.Contains(ae.Message, "bridge.ip is required with agent_url") {
			t.Errorf("registering a %s with an agent_url and no bridge.ip: %v, want 400 invalid_argument naming bridge.ip", name, err)
		}
	}
	if _, err := e.c.Box(e.ctx, box.ID); err == nil {
		t.Error("the refused box is registered")
	}
	box.Bridge.IP = "0.0.0.0"
	if _, _, err := e.c.RegisterBoxAgent(e.ctx, box); !ctlclient.IsCode(err, manager.CodeInvalid) || !strings.Contains(err.Error(), "bridge.ip 0.0.0.0") {
		t.Errorf("registering a box with an agent_url and bridge.ip 0.0.0.0: %v, want 400 invalid_argument naming bridge.ip", err)
	}
	box.Bridge.IP, box.Bridge.UDPPort = "10.1.0.1", 0
	if _, _, err := e.c.RegisterBoxAgent(e.ctx, box); err != nil {
		t.Errorf("a box with an agent_url, bridge.ip and no udp_port: %v", err)
	}
	host.AgentURL = ""
	if _, err := e.c.RegisterHost(e.ctx, host); err != nil {
		t.Errorf("a host without agent_url or bridge.ip: %v", err)
	}
}
