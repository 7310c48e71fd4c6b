package managerd

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/internal/app/childproc"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// credentialedConns reads dxpu_api_connections{class="credentialed"}
// from the manager at base, asking with tok on client's connection (a
// credentialed one itself).
func credentialedConns(t *testing.T, client *http.Client, base, tok string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, `dxpu_api_connections{class="credentialed"} `); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("dxpu_api_connections: %q", line)
			}
			return n
		}
	}
	return 0
}

// TestShutdownFinishesRequestInProgress: SIGTERM lets a request whose body
// is still arriving finish and be answered before the daemon exits: a
// daemon that closed its connections at SIGTERM (Close for Shutdown), or
// gave them no time, fails it.
//
// Each step waits for the daemon to show it got there, not for time to
// pass: the request is in progress once its connection counts as
// credentialed (the admission layer marks it when its handler starts, and
// the handler then waits for the body), and shutdown has begun once the
// listener refuses new connections (Shutdown closes it first, then waits
// for the requests in progress). Only then does the rest of the body go.
func TestShutdownFinishesRequestInProgress(t *testing.T) {
	dir := t.TempDir()
	admin, err := manager.CreateTokenFile(filepath.Join(dir, "admin.tok"))
	if err != nil {
		t.Fatal(err)
	}
	read, err := manager.CreateTokenFile(filepath.Join(dir, "read.tok"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperDirEnv+"="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := childproc.Start(cmd, nil); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	lw := &serveLog{urls: make(chan string, 1)}
	go io.Copy(lw, stdout)
	var base string
	select {
	case base = <-lw.urls:
	case <-exited:
		t.Fatal("the manager ended before serving")
	case <-time.After(30 * time.Second):
		t.Fatal("the manager did not serve within 30s")
	}
	addr := strings.TrimPrefix(base, "http://")

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := `{"host":"h0","box":"nobox","rtt":"5µs"}`
	fmt.Fprintf(c, "PUT /v1/rtt HTTP/1.1\r\nHost: manager\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", admin, len(body), body[:5])
	// The metrics client's own connection is credentialed too (read token).
	metrics := &http.Client{Transport: &http.Transport{}}
	defer metrics.CloseIdleConnections()
	waitfor.Until(t, "the PUT's handler started (its connection credentialed)", func() bool {
		return credentialedConns(t, metrics, base, read) >= 2
	})
	metrics.CloseIdleConnections()

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, "the manager's listener closed after SIGTERM", func() bool {
		probe, err := net.Dial("tcp", addr)
		if err == nil {
			probe.Close()
			return false
		}
		return errors.Is(err, syscall.ECONNREFUSED)
	})
	io.WriteString(c, body[5:])
	c.SetReadDeadline(time.Now().Add(waitfor.Stall))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("request in progress at SIGTERM: %v, want an answer", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	t.Logf("answered %d %s", resp.StatusCode, strings.TrimSpace(string(b)))
	select {
	case <-exited:
	case <-time.After(waitfor.Stall):
		t.Fatalf("the manager did not exit %v after SIGTERM", waitfor.Stall)
	}
}
