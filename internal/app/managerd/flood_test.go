package managerd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/app/childproc"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/testbin"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// helperDirEnv makes the test binary a manager daemon (helperManager);
// the others are flags it adds.
const (
	helperDirEnv           = "DXPU_TEST_MANAGERD_DIR"
	helperAgentCAEnv       = "DXPU_TEST_MANAGERD_AGENT_CA"       // --agent-ca-file
	helperDegradedAfterEnv = "DXPU_TEST_MANAGERD_DEGRADED_AFTER" // --degraded-after
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperDirEnv); dir != "" {
		os.Exit(helperManager(dir))
	}
	code := m.Run()
	testbin.Remove()
	os.Exit(code)
}

// helperManager runs the daemon as `dxpu manager --token-file admin.tok
// --read-token-file read.tok` does, every other flag at its default (the
// listen port excepted, unless the helper environment sets them), logging
// JSON on stdout for the test to read.
func helperManager(dir string) int {
	o := Options{Store: filepath.Join(dir, "m.db"), EtcdPrefix: "/dxpu/", LeaseTTL: 3, Listen: "127.0.0.1:0",
		TokenFile: filepath.Join(dir, "admin.tok"), ReadTokenFile: filepath.Join(dir, "read.tok"),
		MaxConns: manager.DefaultMaxConns, ReconcileInterval: 30 * time.Second, AgentCAFile: os.Getenv(helperAgentCAEnv),
		Log: slog.New(slog.NewJSONHandler(os.Stdout, nil))}
	if d := os.Getenv(helperDegradedAfterEnv); d != "" {
		var err error
		if o.DegradedAfter, err = time.ParseDuration(d); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := Run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// startManager starts the helper daemon (env: its added flags) and returns
// its URL and tokens.
func startManager(t *testing.T, env ...string) (url, admin, read string) {
	t.Helper()
	dir := t.TempDir()
	admin, err := manager.CreateTokenFile(filepath.Join(dir, "admin.tok"))
	if err != nil {
		t.Fatal(err)
	}
	if read, err = manager.CreateTokenFile(filepath.Join(dir, "read.tok")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), helperDirEnv+"="+dir), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := childproc.Start(cmd, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("manager stderr: %s", stderr.String())
		}
	})
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var line struct {
				Msg       string `json:"msg"`
				Advertise string `json:"advertise"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "manager serving" {
				urls <- line.Advertise
			}
		}
		close(urls)
	}()
	url, ok := <-urls
	if !ok {
		t.Fatalf("the manager ended before serving: %s", stderr.String())
	}
	return url, admin, read
}

// freshClient is a ctl client that opens a new connection for every call
// (as one `dxpu ctl` command does) from local address ip.
func freshClient(base, token, ip string) *ctlclient.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c := ctlclient.New(base, token)
	c.HTTP = &http.Client{Timeout: time.Minute, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
	return c
}

// flood is finding 4's attacker: n keep-alive connections from one
// address, each sending one GET /healthz and holding the connection,
// reconnecting (after pause) whenever the manager cuts it.
type flood struct {
	answered atomic.Uint64 // answers read, any status
	ok       atomic.Uint64 // of which 200
	first    atomic.Int64  // connections that got their first answer
	wg       sync.WaitGroup
	cancel   context.CancelFunc
}

func startFlood(addr, from string, n int, pause time.Duration) *flood {
	ctx, cancel := context.WithCancel(context.Background())
	f := &flood{cancel: cancel}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	for range n {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			first := true
			for ctx.Err() == nil {
				if c, err := d.DialContext(ctx, "tcp", addr); err == nil {
					stop := context.AfterFunc(ctx, func() { c.Close() })
					io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: manager\r\n\r\n")
					br := bufio.NewReader(c)
					if resp, err := http.ReadResponse(br, nil); err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						f.answered.Add(1)
						if resp.StatusCode == http.StatusOK {
							f.ok.Add(1)
						}
						if first {
							first = false
							f.first.Add(1)
						}
						br.ReadByte() // hold the connection until it is cut
					}
					stop()
					c.Close()
				}
				select {
				case <-ctx.Done():
				case <-time.After(pause):
				}
			}
		}()
	}
	return f
}

func (f *flood) stop() { f.cancel(); f.wg.Wait() }

// adminCalls makes n admin calls, each on a new connection, and returns
// how many succeeded, their median latency and the failures.
func adminCalls(ctx context.Context, adm *ctlclient.Client, n int) (int, time.Duration, []string) {
	var lat []time.Duration
	var failures []string
	for i := range n {
		start := time.Now()
		var err error
		switch i % 4 {
		case 0:
			_, err = adm.Stats(ctx)
		case 1:
			_, err = adm.Hosts(ctx)
		case 2:
			_, err = adm.Allocations(ctx, "")
		case 3:
			err = adm.SetRTT(ctx, pool.RTT{Host: "h0", Box: "nobox", RTT: pool.Duration(5 * time.Microsecond)})
			if ctlclient.IsCode(err, manager.CodeNotFound) {
				err = nil // served: the box does not exist
			}
		}
		if err != nil {
			failures = append(failures, err.Error())
			continue
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	if len(lat) == 0 {
		return 0, 0, failures
	}
	return len(lat), lat[len(lat)/2], failures
}

// TestFloodLocksNoClientOut repeats finding 4 against the daemon with its
// default flags: 1030 keep-alive connections from one address, each doing
// one GET /healthz and reconnecting when cut. Meanwhile every admin call
// (each on a new connection, like separate ctl commands), an agent's
// link-down report and the switch's table watch (read-only token) must be
// served.
func TestFloodLocksNoClientOut(t *testing.T) {
	privtest.Loopback(t)
	privtest.Short(t, "a 1030-connection flood: a few seconds of both CPUs")
	const floodFrom = "127.0.0.2"
	base, admin, read := startManager(t)
	addr := strings.TrimPrefix(base, "http://")
	ctx := context.Background()
	adm := freshClient(base, admin, "127.0.0.1")
	_, cred, err := adm.RegisterHostAgent(ctx, pool.Host{ID: "h0", Ports: pool.MinHostPorts, AgentURL: "https://127.0.0.1:9",
		Bridge: pool.Endpoint{SwitchPort: "veth-h0", MAC: "02:00:00:00:02:00", IP: "10.2.0.1", UDPPort: 4791}})
	if err != nil || cred == "" {
		t.Fatalf("registering the host's agent: %q %v", cred, err)
	}

	quietOK, quietP50, _ := adminCalls(ctx, adm, 41)

	const conns = 1030
	f := startFlood(addr, floodFrom, conns, 100*time.Millisecond)
	defer f.stop()
	// Every flood connection has been answered once (or refused): the
	// flood holds all it can.
	waitfor.Progress(t, "the flood's first answers", func() (bool, uint64) {
		n := f.first.Load()
		return n >= conns, uint64(n)
	})

	const calls = 113
	ok, p50, failures := adminCalls(ctx, adm, calls)
	t.Logf("admin calls: quiet %d of 41 succeeded, p50 %v; under a %d-connection flood from %s: %d of %d succeeded, p50 %v; flood answers %d (%d ok)",
		quietOK, quietP50.Round(time.Microsecond), conns, floodFrom, ok, calls, p50.Round(time.Microsecond), f.answered.Load(), f.ok.Load())
	if len(failures) > 0 {
		t.Errorf("%d of %d admin calls failed under the flood, first: %s", len(failures), calls, failures[0])
	}

	// The agent's report reaches its handler: pair 1 is in no allocation
	// (404), which is the answer, not a refusal.
	agent := freshClient(base, "", "127.0.0.1")
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/agent/pairs/1/link-down", strings.NewReader(`{"reason":"peer silent for 1s"}`))
	req.Header.Set("Authorization", "Bearer "+cred)
	resp, err := agent.HTTP.Do(req)
	if err != nil {
		t.Fatalf("agent report under the flood: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "in no allocation") {
		t.Errorf("agent report under the flood: %d %s, want 404 from the report's handler", resp.StatusCode, body)
	}

	// The switch follows the table with the read-only token.
	sw := freshClient(base, read, "127.0.0.1")
	tb, err := sw.Table(ctx)
	if err == nil {
		_, err = sw.WatchTable(ctx, tb.Version, 100*time.Millisecond)
	}
	if err != nil {
		t.Errorf("switch table watch under the flood: %v", err)
	}
	var ae *ctlclient.APIError
	if errors.As(err, &ae) {
		t.Logf("switch: %d %s", ae.Status, ae.Code)
	}
}

// TestReadTokenHoldsNoMoreThanItsShare repeats finding F2 against the
// daemon with its default flags: connections that each make one GET with
// the read-only token and then stay open hold at most --max-conns/8 of
// them; the others are refused (503 naming the limit), and the admin and
// /healthz are served.
func TestReadTokenHoldsNoMoreThanItsShare(t *testing.T) {
	privtest.Loopback(t)
	base, admin, read := startManager(t)
	addr := strings.TrimPrefix(base, "http://")
	const conns, share = manager.DefaultMaxConns + 76, manager.DefaultMaxConns / 8
	held := 0
	for i := range conns {
		c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 2, byte(1+i%8))}}).Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET /v1/stats HTTP/1.1\r\nHost: m\r\nAuthorization: Bearer %s\r\n\r\n", read)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("read-only connection %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusOK:
			held++
		case resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), fmt.Sprintf("read-only token holds %d connections", share)):
			t.Fatalf("read-only connection %d: %d %s, want 200 or 503 naming the limit", i, resp.StatusCode, body)
		}
	}
	if held != share {
		t.Errorf("read-only connections held: %d, want %d", held, share)
	}
	ctx := context.Background()
	if _, err := freshClient(base, admin, "127.0.0.1").Stats(ctx); err != nil {
		t.Fatalf("admin with the read-only token's connections held: %v", err)
	}
	if _, err := freshClient(base, "", "127.0.0.1").Healthz(ctx); err != nil {
		t.Fatalf("/healthz with the read-only token's connections held: %v", err)
	}
}
