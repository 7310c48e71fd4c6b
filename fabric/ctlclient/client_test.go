package ctlclient_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
)

func TestErrorsFromNonJSONBodies(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream down", http.StatusBadGateway)
	}))
	defer srv.Close()
	_, err := ctlclient.New(srv.URL, "").Stats(context.Background())
	ae, ok := err.(*ctlclient.APIError)
	if !ok || ae.Status != 502 || ae.Code != "http_502" || ae.Message != "upstream down" {
		t.Fatalf("%#v", err)
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	m, err := manager.New(manager.Config{Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	c := ctlclient.New(srv.URL+"/", "t")
	ctx := context.Background()
	box := pool.Box{ID: "b", Bridge: pool.Endpoint{SwitchPort: "p1", MAC: "02:00:00:00:00:01"},
		GPUs: []pool.GPU{{ID: "b-0", Model: "H100", MemoryMiB: 1}, {ID: "b-1", Model: "H100", MemoryMiB: 1}}}
	if _, err := c.RegisterBox(ctx, box); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RegisterHost(ctx, pool.Host{ID: "h", Bridge: pool.Endpoint{SwitchPort: "p2", MAC: "02:00:00:00:00:02"}, Ports: 32}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetRTT(ctx, pool.RTT{Host: "h", Box: "b", RTT: pool.Duration(7 * time.Microsecond)}); err != nil {
		t.Fatal(err)
	}
	rtts, err := c.RTTs(ctx)
	if err != nil || len(rtts) != 1 || rtts[0].RTT != pool.Duration(7*time.Microsecond) {
		t.Fatalf("%+v %v", rtts, err)
	}
	a, err := c.Allocate(ctx, pool.Request{Host: "h", Count: 1, MaxRTT: pool.Duration(10 * time.Microsecond)})
	if err != nil {
		t.Fatal(err)
	}
	free, _ := c.GPUs(ctx, "b", "free")
	used, _ := c.GPUs(ctx, "", "used")
	if len(free) != 1 || len(used) != 1 || used[0].Allocation != a.ID {
		t.Fatalf("free %+v used %+v", free, used)
	}
	if _, err := c.Allocate(ctx, pool.Request{Host: "h", Count: 1, MaxRTT: pool.Duration(5 * time.Microsecond)}); !ctlclient.IsCode(err, manager.CodeInsufficient) {
		t.Fatalf("max_rtt below the measured RTT: %v", err)
	}
	if _, err := c.RemoveHost(ctx, "h"); !ctlclient.IsCode(err, manager.CodeInUse) {
		t.Fatalf("%v", err)
	}
	hosts, _ := c.Hosts(ctx)
	if len(hosts) != 1 || hosts[0].UsedPorts != 1 {
		t.Fatalf("%+v", hosts)
	}
	list, _ := c.Allocations(ctx, "h")
	none, _ := c.Allocations(ctx, "other")
	if len(list) != 1 || len(none) != 0 {
		t.Fatalf("%v %v", list, none)
	}
	if _, err := c.Free(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RemoveHost(ctx, "h"); err != nil {
		t.Fatal(err)
	}
	if h, err := c.Healthz(ctx); err != nil || h.Role != "leader" {
		t.Fatalf("%+v %v", h, err)
	}
}

func TestFollowsTheLeader(t *testing.T) {
	t.Parallel()
	standby := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(503)
		w.Write([]byte(`{"error":{"code":"not_leader","message":"standby"}}`))
	}))
	defer standby.Close()
	var hits int
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		w.Write([]byte(`{"gpus":7}`))
	}))
	defer leader.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // nothing listens there now
	c := ctlclient.New(dead.URL+", "+standby.URL+","+leader.URL, "")
	s, err := c.Stats(context.Background())
	if err != nil || s.GPUs != 7 || hits != 1 {
		t.Fatalf("%+v %v hits %d", s, err, hits)
	}
	// Only the standby: its refusal is the answer.
	_, err = ctlclient.New(standby.URL, "").Stats(context.Background())
	if !ctlclient.IsCode(err, "not_leader") {
		t.Fatal(err)
	}
	// A manager that answers with an error is not retried elsewhere.
	_, err = ctlclient.New(leader.URL+"/nope,"+standby.URL, "").Allocate(context.Background(), pool.Request{})
	if err == nil {
		t.Fatal("want an error")
	}
}
