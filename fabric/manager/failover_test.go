package manager_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/etcdtest"
	"github.com/dxpu/dxpu/internal/privtest"
)

// TestEtcdFailover runs two manager processes on a three-member etcd
// cluster. The leader is killed with SIGKILL; the standby must take over
// with the pool intact. Then the old leader comes back as a standby and a
// graceful stop (SIGTERM, which resigns) hands the lead back.
func TestEtcdFailover(t *testing.T) {
	privtest.Short(t, "starts etcd and subprocesses")
	cluster := etcdtest.Start(t, 3)
	env := []string{"DXPU_TEST_ETCD=" + strings.Join(cluster.Endpoints, ","), "DXPU_TEST_TTL=2", "DXPU_TEST_TOKEN=" + token}
	ctx := context.Background()
	wait := func(c *ctlclient.Client, role string) time.Duration {
		t.Helper()
		start := time.Now()
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := waitRole(wctx, c, role); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}

	a := startDaemon(t, env...)
	ca := a.client(token)
	wait(ca, "leader")
	b := startDaemon(t, env...)
	cb := b.client(token)
	wait(cb, "standby")

	seed(t, ca, 3, 8, 4)
	var allocs []pool.Allocation
	for i := 0; i < 5; i++ {
		al, err := ca.Allocate(ctx, pool.Request{Host: "host" + string(rune('0'+i%4)), Count: 1 + i%3})
		if err != nil {
			t.Fatal(err)
		}
		allocs = append(allocs, al)
	}
	if _, err := ca.Free(ctx, allocs[1].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.SetGPUHealth(ctx, "box2-gpu7", pool.Unhealthy); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Drain(ctx, "box1", true); err != nil {
		t.Fatal(err)
	}
	before := poolDump(t, ca)

	// The standby refuses API calls and names the leader.
	_, err := cb.Boxes(ctx)
	var ae *ctlclient.APIError
	if !errors.As(err, &ae) || ae.Status != 503 || ae.Code != manager.CodeNotLeader || !strings.Contains(ae.Message, a.url) {
		t.Fatalf("standby answered %v", err)
	}

	// A client given both managers follows the leader.
	both := ctlclient.New(b.url+","+a.url, token)
	if got, err := both.Allocations(ctx, ""); err != nil || len(got) != 4 {
		t.Fatalf("client with both managers: %d allocations, %v", len(got), err)
	}

	a.cmd.Process.Signal(syscall.SIGKILL)
	a.cmd.Wait()
	took := wait(cb, "leader")
	t.Logf("standby took over %v after the leader's SIGKILL (lease TTL 2s)", took.Round(10*time.Millisecond))
	if after := poolDump(t, cb); after != before {
		t.Fatalf("pool changed across failover:\nbefore %s\nafter  %s", before, after)
	}
	tab, err := cb.Table(ctx)
	if err != nil {
		t.Fatal(err)
	}
	live, _ := cb.Allocations(ctx, "")
	if len(tab.Pairs) != len(pairIDs(live...)) {
		t.Fatalf("new leader's table has %d pairs, allocations %d", len(tab.Pairs), len(pairIDs(live...)))
	}
	if _, err := both.Allocate(ctx, pool.Request{Host: "host0", Count: 2}); err != nil {
		t.Fatal(err)
	}

	// The old leader returns as a standby; a graceful stop hands over fast.
	a2 := startDaemon(t, env...)
	ca2 := a2.client(token)
	wait(ca2, "standby")
	before = poolDump(t, cb)
	b.cmd.Process.Signal(syscall.SIGTERM)
	b.cmd.Wait()
	took = wait(ca2, "leader")
	t.Logf("standby took over %v after the leader's SIGTERM (resign)", took.Round(10*time.Millisecond))
	if after := poolDump(t, ca2); after != before {
		t.Fatalf("pool changed across handover:\nbefore %s\nafter  %s", before, after)
	}
}
