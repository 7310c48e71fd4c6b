package manager_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/fakeagent"
)

// The manager runs in-process, as the demo runs it: an in-memory store (or
// store.OpenBolt on a temporary file), agents that implement the
// programmer interfaces, and the HTTP API on any listener.
func Example() {
	gpuBridge, hostBridge := fakeagent.New("gpu"), fakeagent.New("host")
	m, err := manager.New(manager.Config{GPUBridge: gpuBridge, HostBridge: hostBridge, Token: "demo"})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()

	c := ctlclient.New(srv.URL, "demo")
	ctx := context.Background()
	c.RegisterBox(ctx, pool.Box{ID: "box0",
		Bridge: pool.Endpoint{SwitchPort: "veth-b0", MAC: "02:00:00:00:01:00", IP: "10.0.1.1", UDPPort: 4791},
		GPUs: []pool.GPU{
			{ID: "box0-g0", Model: "H100", MemoryMiB: 81920, BDF: "0000:18:00.0"},
			{ID: "box0-g1", Model: "H100", MemoryMiB: 81920, BDF: "0000:19:00.0"},
		}})
	c.RegisterHost(ctx, pool.Host{ID: "host0", Ports: 32,
		Bridge: pool.Endpoint{SwitchPort: "veth-h0", MAC: "02:00:00:00:02:00", IP: "10.0.2.1", UDPPort: 4791}})

	a, err := c.Allocate(ctx, pool.Request{Host: "host0", Count: 2})
	if err != nil {
		panic(err)
	}
	fmt.Println(a.State, a.GPUIDs())
	fmt.Println("hot-added on the host:", hostBridge.HotAdded())
	tab, _ := c.Table(ctx)
	fmt.Println("switch table pairs:", len(tab.Pairs))
	// Output:
	// active [box0-g0 box0-g1]
	// hot-added on the host: [1 2]
	// switch table pairs: 2
}
