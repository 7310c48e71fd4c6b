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

// TestBridgeAgentSizes runs a manager and two agents as shipped, both with
// jumbo frames and 2 KiB payloads (--mtu 8972 --max-payload 2048): the
// lent GPU's pair runs at those sizes (the host agent's status says so,
// and what the box's end announced) and a 64 KiB copy check crosses it
// whole. A size that makes no sense stops the agent at once, naming its
// flag.
func TestBridgeAgentSizes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three daemons")
	}
	t.Parallel()
	l := newAgentLab(t, nil, []string{"--mtu", "8972", "--max-payload", "2048"}, nil, nil)
	a, err := l.c.Allocate(l.ctx, pool.Request{Host: "h1", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	type pairStatus struct {
		ID             uint32 `json:"id"`
		Link           string `json:"link"`
		MTU            int    `json:"mtu_bytes"`
		MaxPayload     int    `json:"max_payload_bytes"`
		PeerMaxPayload int    `json:"peer_max_payload_bytes"`
	}
	var st struct {
		Pairs []pairStatus `json:"pairs"`
		Slots []struct {
			Present bool `json:"present"`
		} `json:"slots"`
	}
	waitfor.Until(t, "the GPU on the host over an up link", func() bool {
		l.hostCall(t, http.MethodGet, "/agent/v1/status", "", &st)
		return len(st.Pairs) == 1 && st.Pairs[0].Link == "up" && len(st.Slots) == 1 && st.Slots[0].Present
	})
	if want := (pairStatus{ID: a.GPUs[0].Pair, Link: "up", MTU: 8972, MaxPayload: 2048, PeerMaxPayload: 2048}); st.Pairs[0] != want {
		t.Errorf("host agent's pair %+v, want %+v", st.Pairs[0], want)
	}
	data := make([]byte, 64<<10)
	for i := range data {
		data[i] = byte(i*13 + 5)
	}
	if code, back := l.copyCheck(t, a.GPUs[0].Pair, 4096, data); code != http.StatusOK || !bytes.Equal(back, data) {
		t.Fatalf("copy check of 64 KiB: HTTP %d, %d bytes back, equal %v", code, len(back), bytes.Equal(back, data))
	}

	cred := filepath.Join(t.TempDir(), "cred")
	if err := os.WriteFile(cred, []byte("c0ffee\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for flag, args := range map[string][]string{
		"--mtu 9217":             {"--role", "gpu", "--mtu", "9217"},
		"--max-payload 1002":     {"--role", "gpu", "--max-payload", "1002"},
		"--mps 1024 exceeds":     {"--role", "gpu", "--pcie", "memory", "--mps", "1024"},
		"--mps shapes a memory ": {"--role", "host", "--mps", "512"},
	} {
		_, _, err := runDxpu(t, "", append([]string{"bridge", "agent", "--agent-listen", "127.0.0.1:1", "--agent-credential-file", cred,
			"--listen", "127.0.0.1:1", "--insecure"}, args...)...)
		var ec exitCodeError
		if !errors.As(err, &ec) || ec.code != 2 || !strings.Contains(err.Error(), flag) {
			t.Errorf("%v: %v, want exit code 2 naming %q", args, err, flag)
		}
	}
}
