package bridgeagent_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/internal/app/bridgeagent"
	"github.com/dxpu/dxpu/internal/app/httpguard"
	"github.com/dxpu/dxpu/internal/app/httpguard/guardtest"
	"github.com/dxpu/dxpu/internal/testbin"
)

// TestAgentBodyTimeout: `dxpu bridge agent --role host --insecure
// --metrics` given a request's headers with a body declared and no body
// answers it within bridgeagent.APIBodyTimeout, not the 30s of its
// ReadTimeout: a call that reads the body (the manager's PUT of a pair,
// the copy check) is 400 at the body bound and its connection closed; one
// refused before its body (no credential), and a scrape with a body, are
// answered at once and their connections closed. A copy check whose body
// comes in two parts 100ms apart is served, and the connection stays open.
func TestAgentBodyTimeout(t *testing.T) {
	t.Parallel()
	bin := testbin.Dxpu(t)
	dir := t.TempDir()
	credFile := dir + "/agent.cred"
	cred, err := manager.CreateTokenFile(credFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "bridge", "agent", "--role", "host", "--insecure",
		"--agent-listen", fmt.Sprintf("127.0.0.1:%d", freePort(t, "tcp")), "--agent-credential-file", credFile,
		"--listen", fmt.Sprintf("127.0.0.1:%d", freePort(t, "udp")), "--metrics", fmt.Sprintf("127.0.0.1:%d", freePort(t, "tcp")))
	cmd.Dir = dir
	p := runProc(t, "host agent", cmd, nil)
	metrics := strings.TrimPrefix(strings.TrimSuffix(field(t, p.waitLines(t, 1, `msg="agent metrics serving"`)[0], "url"), "/metrics"), "http://")
	api := strings.TrimPrefix(field(t, p.waitLines(t, 1, `msg="agent API serving"`)[0], "url"), "http://")
	auth := "Authorization: Bearer " + cred

	const bound = bridgeagent.APIBodyTimeout
	for _, tc := range []struct {
		name, addr, method, path string
		hdr                      []string
		status                   int
		reads                    bool // the handler reads the body: answered at the bound
	}{
		{"pair", api, "PUT", "/agent/v1/pairs/1", []string{auth}, http.StatusBadRequest, true},
		{"hot-add chunked", api, "POST", "/agent/v1/pairs/1/hot-add", []string{auth, "Transfer-Encoding: chunked"}, http.StatusBadRequest, true},
		{"copy check", api, "POST", "/agent/v1/pairs/1/copy-check", []string{auth}, http.StatusBadRequest, true},
		{"pair, no credential", api, "PUT", "/agent/v1/pairs/1", nil, http.StatusUnauthorized, false},
		{"copy check, no credential", api, "POST", "/agent/v1/pairs/1/copy-check", nil, http.StatusUnauthorized, false},
		{"metrics", metrics, "GET", "/metrics", nil, http.StatusOK, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			within := bound + 3*time.Second // the slack of a loaded machine
			if tc.addr == metrics {
				within = httpguard.MetricsBodyTimeout + 3*time.Second
			}
			s, err := guardtest.StallBody(guardtest.Dial(t, "127.0.0.1", tc.addr), tc.method, tc.path, within, tc.hdr...)
			what := fmt.Sprintf("%s %s (%s) with no body after its headers", tc.method, tc.path, tc.name)
			if err != nil {
				t.Fatalf("%s, body bound %v: %v", what, bound, err)
			}
			if s.Status != tc.status {
				t.Fatalf("%s: %v; want %d", what, s, tc.status)
			}
			if tc.reads && (s.Answered < bound || !strings.Contains(s.Body, "timeout")) {
				t.Errorf("%s: %v; want 400 naming the timeout at the body bound %v", what, s, bound)
			}
			if !tc.reads && (s.Answered >= bound/2 || s.Closed >= bound/2) {
				t.Errorf("%s: %v; want the answer and the close at once, not at the body bound %v", what, s, bound)
			}
		})
	}
	t.Run("copy check in two parts", func(t *testing.T) {
		t.Parallel()
		c := guardtest.Dial(t, "127.0.0.1", api)
		body := `{"offset":0,"data":"AAECAw=="}`
		fmt.Fprintf(c, "POST /agent/v1/pairs/7/copy-check HTTP/1.1\r\nHost: a\r\n%s\r\nContent-Length: %d\r\n\r\n%s", auth, len(body), body[:10])
		time.Sleep(100 * time.Millisecond) // the client's pause between the parts, the case tested
		io.WriteString(c, body[10:])
		br := bufio.NewReader(c)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("copy check, body in two parts 100ms apart: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// Pair 7 is not programmed: the handler read the whole body to say so.
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), "pair 7") || resp.Close {
			t.Fatalf("copy check, body in two parts 100ms apart: %d (close %v) %s; want 404 naming pair 7, kept alive", resp.StatusCode, resp.Close, b)
		}
		if code, err := guardtest.Get(c, "/agent/v1/status", auth); err != nil || code != http.StatusOK {
			t.Fatalf("next request on the connection: %d, %v; want 200", code, err)
		}
	})
}
