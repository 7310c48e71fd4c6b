package managerbench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/dxpu/dxpu/fabric/store"
	"github.com/dxpu/dxpu/internal/app/childproc"
)

// ErrNoEtcd is returned when a local cluster is asked for and no etcd
// binary is on PATH.
var ErrNoEtcd = errors.New("managerbench: etcd not found on PATH (install etcd-server, or give --etcd-endpoints)")

// localEtcd is a cluster of etcd processes on 127.0.0.1 that this run
// started, its data under dir.
type localEtcd struct {
	endpoints []string
	cmds      []*exec.Cmd
	dir       string
}

// startLocalEtcd starts an n-member etcd cluster on loopback with its data
// under a fresh directory and returns once it answers.
func startLocalEtcd(ctx context.Context, n int) (*localEtcd, error) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return nil, ErrNoEtcd
	}
	dir, err := os.MkdirTemp("", "dxpu-bench-etcd-")
	if err != nil {
		return nil, fmt.Errorf("managerbench: %w", err)
	}
	l := &localEtcd{dir: dir}
	type member struct{ name, client, peer string }
	ms := make([]member, n)
	var initial []string
	for i := range ms {
		c, err := freeURL()
		if err != nil {
			l.stop()
			return nil, err
		}
		p, err := freeURL()
		if err != nil {
			l.stop()
			return nil, err
		}
		ms[i] = member{fmt.Sprintf("m%d", i), c, p}
		initial = append(initial, ms[i].name+"="+p)
	}
	for _, m := range ms {
		logf, err := os.Create(filepath.Join(dir, m.name+".log"))
		if err != nil {
			l.stop()
			return nil, fmt.Errorf("managerbench: %w", err)
		}
		cmd := exec.Command(bin,
			"--name", m.name, "--data-dir", filepath.Join(dir, m.name),
			"--listen-client-urls", m.client, "--advertise-client-urls", m.client,
			"--listen-peer-urls", m.peer, "--initial-advertise-peer-urls", m.peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "dxpu-bench", "--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn")
		cmd.Stdout, cmd.Stderr = logf, logf
		err = childproc.Start(cmd, nil)
		logf.Close()
		if err != nil {
			l.stop()
			return nil, fmt.Errorf("managerbench: starting etcd member %s: %w", m.name, err)
		}
		l.cmds = append(l.cmds, cmd)
		l.endpoints = append(l.endpoints, m.client)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		s, err := store.OpenEtcd(store.EtcdConfig{Endpoints: l.endpoints, DialTimeout: 2 * time.Second, Prefix: "/dxpu-bench-probe/"})
		if err == nil {
			err = s.Apply(ctx, store.Put("ready", []byte("1")))
			s.Close()
		}
		if err == nil {
			return l, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			l.stop()
			return nil, fmt.Errorf("managerbench: local etcd cluster %v did not answer within 60 s: %w", l.endpoints, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop kills the members and removes their data.
func (l *localEtcd) stop() {
	for _, c := range l.cmds {
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	os.RemoveAll(l.dir)
}

// freeURL is an http URL on a loopback port free just now.
func freeURL() (string, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("managerbench: a free port: %w", err)
	}
	defer ln.Close()
	return "http://" + ln.Addr().String(), nil
}
