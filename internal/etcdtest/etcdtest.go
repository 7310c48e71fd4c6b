// Package etcdtest starts real etcd servers (Debian's etcd-server package)
// on loopback for tests. Tests that use it are gated on the etcd binary by
// internal/privtest.
package etcdtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/dxpu/dxpu/internal/privtest"
)

func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Cluster is a running etcd cluster.
type Cluster struct {
	Endpoints []string
	cmds      []*exec.Cmd
}

// Start runs an etcd cluster of n members and returns once it answers. It
// skips the test (or fails it under DXPU_REQUIRE_PRIVILEGED=1) when etcd
// is not installed.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	bin := privtest.Tool(t, "etcd")
	dir := t.TempDir()
	type member struct{ name, client, peer string }
	ms := make([]member, n)
	var initial []string
	for i := range ms {
		ms[i] = member{fmt.Sprintf("m%d", i), "http://" + freePort(t), "http://" + freePort(t)}
		initial = append(initial, ms[i].name+"="+ms[i].peer)
	}
	c := &Cluster{}
	for i, m := range ms {
		logf, err := os.Create(filepath.Join(dir, m.name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin,
			"--name", m.name, "--data-dir", filepath.Join(dir, m.name),
			"--listen-client-urls", m.client, "--advertise-client-urls", m.client,
			"--listen-peer-urls", m.peer, "--initial-advertise-peer-urls", m.peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "dxpu-test", "--heartbeat-interval", "50", "--election-timeout", "500",
			"--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn")
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting etcd member %d: %v", i, err)
		}
		c.cmds = append(c.cmds, cmd)
		c.Endpoints = append(c.Endpoints, m.client)
	}
	t.Cleanup(func() {
		for _, cmd := range c.cmds {
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
		}
		if t.Failed() {
			for _, m := range ms {
				b, _ := os.ReadFile(filepath.Join(dir, m.name+".log"))
				if len(b) > 3000 {
					b = b[len(b)-3000:]
				}
				t.Logf("etcd %s log tail:\n%s", m.name, b)
			}
		}
	})
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := cli.Put(ctx, "/etcdtest/ready", "1")
		cancel()
		if err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd cluster %v not ready after 60s: %v", c.Endpoints, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
