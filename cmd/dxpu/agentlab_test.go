package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/syncbuf"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// agentLab is a manager and the agents of one GPU box (box0, one H100)
// and one host (h1), each a dxpu process over loopback, registered and
// serving.
type agentLab struct {
	ctx                 context.Context
	dir, mgr            string // the files' directory, the manager's URL
	c                   *ctlclient.Client
	box                 pool.Box
	hostCred            string
	hostAPI             int // the host agent's TCP port
	boxArgs             []string
	mgrLog              *syncbuf.Buffer
	boxAgent, hostAgent *exec.Cmd
	boxLog, hostLog     *syncbuf.Buffer
}

// newAgentLab starts the manager with mgrFlags added to its own, and the
// agents with agentFlags (both), boxFlags and hostFlags added to theirs
// (--insecure and --manager come first).
func newAgentLab(t *testing.T, mgrFlags, agentFlags, boxFlags, hostFlags []string) *agentLab {
	t.Helper()
	l := &agentLab{dir: t.TempDir()}
	admin, err := manager.CreateTokenFile(filepath.Join(l.dir, "admin.tok"))
	if err != nil {
		t.Fatal(err)
	}
	tcp, udp := freePorts(t, "tcp", 3), freePorts(t, "udp", 2)
	l.mgr, l.hostAPI = fmt.Sprintf("http://127.0.0.1:%d", tcp[0]), int(tcp[2])
	_, l.mgrLog = daemon(t, append([]string{"manager", "--listen", fmt.Sprintf("127.0.0.1:%d", tcp[0]), "--store", filepath.Join(l.dir, "m.db"),
		"--token-file", filepath.Join(l.dir, "admin.tok"), "--allow-insecure-agents"}, mgrFlags...)...)
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	l.ctx, l.c = ctx, ctlclient.New(l.mgr, admin)
	waitfor.Until(t, "the manager serving", func() bool { _, err := l.c.Hosts(ctx); return err == nil })

	l.box = pool.Box{ID: "box0", AgentURL: fmt.Sprintf("http://127.0.0.1:%d", tcp[1]),
		Bridge: pool.Endpoint{SwitchPort: "p-box0", MAC: "02:00:00:00:01:00", IP: "127.0.0.1", UDPPort: udp[0]},
		GPUs:   []pool.GPU{{ID: "box0-g0", Model: "H100", MemoryMiB: 81920, BDF: "0000:18:00.0"}}}
	_, boxCred, err := l.c.RegisterBoxAgent(ctx, l.box)
	if err != nil {
		t.Fatal(err)
	}
	_, l.hostCred, err = l.c.RegisterHostAgent(ctx, pool.Host{ID: "h1", Ports: 32, AgentURL: fmt.Sprintf("http://127.0.0.1:%d", tcp[2]),
		Bridge: pool.Endpoint{SwitchPort: "p-h1", MAC: "02:00:00:00:02:01", IP: "127.0.0.1", UDPPort: udp[1]}})
	if err != nil {
		t.Fatal(err)
	}
	boxJSON, _ := json.Marshal(l.box)
	for name, data := range map[string]string{"box.json": string(boxJSON), "box.cred": boxCred, "host.cred": l.hostCred} {
		if err := os.WriteFile(filepath.Join(l.dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	common := append([]string{"--insecure", "--manager", l.mgr}, agentFlags...)
	l.boxArgs = append(append([]string{"bridge", "agent", "--role", "gpu", "--box", filepath.Join(l.dir, "box.json"),
		"--agent-listen", fmt.Sprintf("127.0.0.1:%d", tcp[1]), "--agent-credential-file", filepath.Join(l.dir, "box.cred"),
		"--listen", fmt.Sprintf("127.0.0.1:%d", udp[0])}, common...), boxFlags...)
	l.boxAgent, l.boxLog = daemon(t, l.boxArgs...)
	l.hostAgent, l.hostLog = daemon(t, append(append([]string{"bridge", "agent", "--role", "host", "--host-id", "h1",
		"--agent-listen", fmt.Sprintf("127.0.0.1:%d", tcp[2]), "--agent-credential-file", filepath.Join(l.dir, "host.cred"),
		"--listen", fmt.Sprintf("127.0.0.1:%d", udp[1])}, common...), hostFlags...)...)
	for _, lg := range []*syncbuf.Buffer{l.boxLog, l.hostLog} {
		waitfor.Until(t, "the agents serving", func() bool { return strings.Contains(lg.String(), "agent API serving") })
	}
	return l
}

// allocation returns allocation id as the manager has it now.
func (l *agentLab) allocation(t *testing.T, id string) pool.Allocation {
	t.Helper()
	got, err := l.c.Allocation(l.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// hostCall makes an API call to the host's agent with its credential and
// decodes the JSON answer into v; it returns the HTTP status.
func (l *agentLab) hostCall(t *testing.T, method, path, body string, v any) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(l.ctx, method, fmt.Sprintf("http://127.0.0.1:%d%s", l.hostAPI, path), strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+l.hostCred)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s %s: HTTP %d: %v", method, path, resp.StatusCode, err)
	}
	return resp.StatusCode
}

// copyCheck writes data at offset of pair's GPU through the host agent's
// copy check and returns the HTTP status and the bytes read back.
func (l *agentLab) copyCheck(t *testing.T, pair uint32, offset int, data []byte) (int, []byte) {
	t.Helper()
	var back struct {
		Data []byte `json:"data"`
	}
	body := fmt.Sprintf(`{"offset":%d,"data":%q}`, offset, base64.StdEncoding.EncodeToString(data))
	code := l.hostCall(t, http.MethodPost, fmt.Sprintf("/agent/v1/pairs/%d/copy-check", pair), body, &back)
	return code, back.Data
}
