package store_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/store"
	"github.com/dxpu/dxpu/internal/etcdtest"
)

func conformance(t *testing.T, s store.Store) {
	ctx := context.Background()
	if _, err := s.Get(ctx, "box/a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get of missing key: %v", err)
	}
	if err := s.Apply(ctx, store.Put("box/a", []byte("1")), store.Put("box/b", []byte("2")), store.Put("host/x", []byte("3")), store.Put("boxy", []byte("4"))); err != nil {
		t.Fatal(err)
	}
	v, err := s.Get(ctx, "box/b")
	if err != nil || string(v) != "2" {
		t.Fatalf("get: %q %v", v, err)
	}
	kvs, err := s.List(ctx, "box/")
	if err != nil || len(kvs) != 2 || kvs[0].Key != "box/a" || kvs[1].Key != "box/b" || string(kvs[1].Value) != "2" {
		t.Fatalf("list: %+v %v", kvs, err)
	}
	if err := s.Apply(ctx, store.Delete("box/a"), store.Put("box/b", []byte("22")), store.Delete("box/none")); err != nil {
		t.Fatal(err)
	}
	kvs, _ = s.List(ctx, "box/")
	if len(kvs) != 1 || string(kvs[0].Value) != "22" {
		t.Fatalf("after batch: %+v", kvs)
	}
	if err := s.Apply(ctx, store.Put("", nil)); err == nil {
		t.Fatal("empty key accepted")
	}
	all, _ := s.List(ctx, "")
	if len(all) != 3 {
		t.Fatalf("list all: %+v", all)
	}
}

func TestMemory(t *testing.T) { conformance(t, store.NewMemory()) }

func TestBolt(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := store.OpenBolt(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	conformance(t, s)
	// A second opener waits for the lock, then gives up.
	if _, err := store.OpenBolt(path, 50*time.Millisecond); err == nil {
		t.Fatal("two openers of one bbolt file")
	}
	s.Close()
	s, err = store.OpenBolt(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := s.Get(context.Background(), "box/b"); err != nil || string(v) != "22" {
		t.Fatalf("after reopen: %q %v", v, err)
	}
}

func TestEtcd(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 1)
	s, err := store.OpenEtcd(store.EtcdConfig{Endpoints: c.Endpoints, Prefix: "/t1/"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conformance(t, s)
	// Batches beyond etcd's 128-operation Txn limit still apply.
	var ops []store.Op
	for i := 0; i < 250; i++ {
		ops = append(ops, store.Put(fmt.Sprintf("rtt/h%03d/b", i), []byte("1")))
	}
	if err := s.Apply(context.Background(), ops...); err != nil {
		t.Fatal(err)
	}
	if kvs, _ := s.List(context.Background(), "rtt/"); len(kvs) != 250 {
		t.Fatalf("%d of 250 written", len(kvs))
	}
}

// TestEtcdElectionFencing: the leader writes; once its election key is gone
// (lease lost), its writes fail with ErrNotLeader, its lost channel closes,
// and the standby takes over.
func TestEtcdElectionFencing(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 1)
	ctx := context.Background()
	open := func() *store.Etcd {
		s, err := store.OpenEtcd(store.EtcdConfig{Endpoints: c.Endpoints, Prefix: "/t2/", LeaseTTL: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(), open()
	lostA, err := a.Campaign(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	if l, err := b.Leader(ctx); err != nil || l != "A" {
		t.Fatalf("leader %q %v", l, err)
	}
	wonB := make(chan error, 1)
	var lostB <-chan struct{}
	go func() {
		var err error
		lostB, err = b.Campaign(ctx, "B")
		wonB <- err
	}()
	if err := a.Apply(ctx, store.Put("k", []byte("from A"))); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-wonB:
		t.Fatalf("B won while A leads: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	// A resigns: B takes over at once and A may no longer write.
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-wonB:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("B did not take over after A resigned")
	}
	select {
	case <-lostA:
	case <-time.After(10 * time.Second):
		t.Fatal("A's lost channel did not close")
	}
	if err := b.Apply(ctx, store.Put("k", []byte("from B"))); err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(ctx, store.Put("k", []byte("from A again"))); !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("resigned A wrote: %v", err)
	}
	if err := b.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lostB:
	case <-time.After(10 * time.Second):
		t.Fatal("B's lost channel did not close")
	}
	v, _ := b.Get(ctx, "k")
	if string(v) != "from B" {
		t.Fatalf("k = %q", v)
	}
}

// TestEtcdStaleLeaderCannotWrite deletes the leader's election key behind
// its back (as lease expiry would) and checks the fence.
func TestEtcdStaleLeaderCannotWrite(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 1)
	ctx := context.Background()
	a, err := store.OpenEtcd(store.EtcdConfig{Endpoints: c.Endpoints, Prefix: "/t3/", LeaseTTL: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	lost, err := a.Campaign(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(ctx, store.Put("k", []byte("1"))); err != nil {
		t.Fatal(err)
	}
	if err := etcdDeletePrefix(c.Endpoints, "/t3/election"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("lost channel did not close when the election key vanished")
	}
	if err := a.Apply(ctx, store.Put("k", []byte("2"))); !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("stale leader wrote: %v", err)
	}
	v, _ := a.Get(ctx, "k")
	if string(v) != "1" {
		t.Fatal(fmt.Sprintf("k = %q", v))
	}
}
