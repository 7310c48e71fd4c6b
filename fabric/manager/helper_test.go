package manager_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/store"
	"github.com/dxpu/dxpu/internal/app/childproc"
	"github.com/dxpu/dxpu/internal/fakeagent"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// The test binary doubles as a manager daemon for the crash and failover
// tests: with DXPU_TEST_MANAGER=1 it runs helperMain instead of the tests.
// Settings come from the environment:
//
//	DXPU_TEST_BOLT    bbolt file
//	DXPU_TEST_ETCD    comma-separated etcd endpoints (instead of bolt)
//	DXPU_TEST_TTL     etcd lease TTL in seconds
//	DXPU_TEST_AGENTS  directory for file-backed fake agents (else in memory)
//	DXPU_TEST_DELAY   delay of every agent call
//	DXPU_TEST_TOKEN   bearer token
//	DXPU_TEST_DEGRADED_AFTER  Config.DegradedAfter
//
// It prints "LISTEN <url>" on stdout once it serves.
func TestMain(m *testing.M) {
	if os.Getenv("DXPU_TEST_MANAGER") == "1" {
		if err := helperMain(); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func helperMain() error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var st store.Store
	var err error
	if eps := os.Getenv("DXPU_TEST_ETCD"); eps != "" {
		ttl, _ := strconv.Atoi(os.Getenv("DXPU_TEST_TTL"))
		st, err = store.OpenEtcd(store.EtcdConfig{Endpoints: strings.Split(eps, ","), LeaseTTL: ttl})
	} else {
		st, err = store.OpenBolt(os.Getenv("DXPU_TEST_BOLT"), 5*time.Second)
	}
	if err != nil {
		return err
	}
	agents := [3]*fakeagent.Agent{}
	for i, name := range []string{"gpu", "switch", "host"} {
		if dir := os.Getenv("DXPU_TEST_AGENTS"); dir != "" {
			if agents[i], err = fakeagent.Open(name, filepath.Join(dir, name+".log")); err != nil {
				return err
			}
		} else {
			agents[i] = fakeagent.New(name)
		}
		if d, err := time.ParseDuration(os.Getenv("DXPU_TEST_DELAY")); err == nil {
			agents[i].SetDelay(d)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	url := "http://" + ln.Addr().String()
	degradedAfter, _ := time.ParseDuration(os.Getenv("DXPU_TEST_DEGRADED_AFTER"))
	m, err := manager.New(manager.Config{
		Store: st, GPUBridge: agents[0], Switch: agents[1], HostBridge: agents[2],
		Token: os.Getenv("DXPU_TEST_TOKEN"), ID: url, Logger: log, ReconcileInterval: -1,
		DegradedAfter: degradedAfter,
	})
	if err != nil {
		return err
	}
	fmt.Printf("LISTEN %s\n", url)
	srv := &http.Server{Handler: m.Handler()}
	go srv.Serve(ln)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	srv.Close()
	m.Close()
	return st.Close()
}

// daemon is a helper manager process.
type daemon struct {
	cmd *exec.Cmd
	url string
}

func startDaemon(t *testing.T, env ...string) *daemon {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{"DXPU_TEST_MANAGER=1"}, env...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.CreateTemp(t.TempDir(), "daemon-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logf
	if err := childproc.Start(cmd, nil); err != nil {
		t.Fatal(err)
	}
	d := &daemon{cmd: cmd}
	t.Cleanup(func() {
		d.kill()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("daemon %s log:\n%s", d.url, tail(string(b), 4000))
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "LISTEN "); ok {
				lines <- u
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	// A start under load may be slow; a stuck one is a daemon using no
	// CPU and logging nothing.
	waitfor.Progress(t, "the daemon starting", func() (bool, uint64) {
		select {
		case d.url = <-lines:
			return true, 0
		default:
		}
		st, _ := logf.Stat()
		return false, waitfor.ProcessCPU(cmd.Process.Pid) + uint64(st.Size())
	})
	return d
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func (d *daemon) kill() {
	if d.cmd.ProcessState == nil {
		d.cmd.Process.Signal(syscall.SIGKILL)
		d.cmd.Wait()
	}
}

func (d *daemon) client(token string) *ctlclient.Client { return ctlclient.New(d.url, token) }

// waitRole polls /healthz until the daemon reports role, or the deadline.
func waitRole(ctx context.Context, c *ctlclient.Client, role string) error {
	for {
		h, err := c.Healthz(ctx)
		if err == nil && h.Role == role {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for role %s: last %+v %v", role, h, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
