package main

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// TestBridgeAgentSpin runs a manager and two agents as shipped, both with
// --spin: each says so when it starts, and a lent GPU's pair, its runners
// polling the shared data-plane socket's queue, carries a 64 KiB copy
// check whole. A --spin past 1s stops the agent at once, naming it.
func TestBridgeAgentSpin(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three daemons")
	}
	t.Parallel()
	l := newAgentLab(t, nil, []string{"--spin", "200us"}, nil, nil)
	for side, lg := range map[string]string{"box": l.boxLog.String(), "host": l.hostLog.String()} {
		if !strings.Contains(lg, "spin=200us") {
			t.Errorf("the %s agent's start line does not say spin=200us:\n%s", side, lg)
		}
	}
	a, err := l.c.Allocate(l.ctx, pool.Request{Host: "h1", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Pairs []struct {
			Link string `json:"link"`
		} `json:"pairs"`
		Slots []struct {
			Present bool `json:"present"`
		} `json:"slots"`
	}
	waitfor.Until(t, "the GPU on the host over an up link", func() bool {
		l.hostCall(t, http.MethodGet, "/agent/v1/status", "", &st)
		return len(st.Pairs) == 1 && st.Pairs[0].Link == "up" && len(st.Slots) == 1 && st.Slots[0].Present
	})
	data := make([]byte, 64<<10)
	for i := range data {
		data[i] = byte(i*7 + 3)
	}
	if code, back := l.copyCheck(t, a.GPUs[0].Pair, 8192, data); code != http.StatusOK || !bytes.Equal(back, data) {
		t.Fatalf("copy check of 64 KiB with both agents spinning: HTTP %d, %d bytes back, equal %v", code, len(back), bytes.Equal(back, data))
	}

	cred := filepath.Join(t.TempDir(), "cred")
	if err := os.WriteFile(cred, []byte("c0ffee\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = runDxpu(t, "", "bridge", "agent", "--role", "gpu", "--agent-listen", "127.0.0.1:1", "--agent-credential-file", cred,
		"--listen", "127.0.0.1:1", "--insecure", "--spin", "2s")
	var ec exitCodeError
	if !errors.As(err, &ec) || ec.code != 2 || !strings.Contains(err.Error(), "--spin 2s") {
		t.Errorf("--spin 2s: %v, want exit code 2 naming --spin 2s", err)
	}
}
