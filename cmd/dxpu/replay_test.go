package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/internal/switchtest"
)

func runReplayWith(t *testing.T, pcap, out, expect string) (string, error) {
	t.Helper()
	replayFlags.pcap, replayFlags.table, replayFlags.mode = pcap, "../../testdata/switch/corpus-table.json", "go"
	replayFlags.out, replayFlags.expect, replayFlags.port = out, expect, "host"
	replayFlags.portAddrs = []string{"host=02:5e:00:00:00:01/10.255.0.1", "gpu=02:5e:00:00:00:02/10.255.0.2"}
	replayFlags.udpPort = 8855
	var buf bytes.Buffer
	replayCmd.SetOut(&buf)
	err := runReplay(replayCmd, nil)
	return buf.String(), err
}

// TestReplayMatchesExpected replays the corpus through the Go path and
// checks the committed expected outputs, and that a wrong expectation
// fails with exit status 1.
func TestReplayMatchesExpected(t *testing.T) {
	caps, _ := filepath.Glob("../../testdata/pcap/*.pcap*")
	if len(caps) == 0 {
		t.Skip("no replay corpus")
	}
	for _, c := range caps {
		exp := filepath.Join("../../testdata/switch/expected", filepath.Base(c)+".out.pcap")
		out, err := runReplayWith(t, c, filepath.Join(t.TempDir(), "out.pcap"), exp)
		if err != nil {
			t.Fatalf("%s: %v\n%s", c, err, out)
		}
		if !strings.Contains(out, "output matches") {
			t.Fatalf("%s: %s", c, out)
		}
	}
	// Expecting another capture's output must fail with status 1.
	_, err := runReplayWith(t, "../../testdata/pcap/dxpu-eth.pcap", "", "../../testdata/switch/expected/dxpu-udp.pcap.out.pcap")
	var ec exitCodeError
	if !errors.As(err, &ec) || ec.code != 1 {
		t.Fatalf("mismatch: %v", err)
	}
}

func TestReplayBadFlags(t *testing.T) {
	for _, tc := range []struct{ name, mode, addr, want string }{
		{"mode", "ebpf", "", "--mode"},
		{"port-addr", "go", "nosuch=02:00:00:00:00:01", "--port-addr"},
		{"port-addr-ip", "go", "host=02:00:00:00:00:01/::1", "IPv4"},
	} {
		replayFlags.pcap, replayFlags.table, replayFlags.mode = "x.pcap", "../../testdata/switch/corpus-table.json", tc.mode
		replayFlags.portAddrs = nil
		if tc.addr != "" {
			replayFlags.portAddrs = []string{tc.addr}
		}
		replayFlags.port, replayFlags.expect, replayFlags.out = "", "", ""
		err := runReplay(replayCmd, nil)
		var ec exitCodeError
		if !errors.As(err, &ec) || ec.code != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// fakeManager serves GET /v1/table with the manager's watch semantics
// (long-poll until the version differs).
type fakeManager struct {
	mu      sync.Mutex
	current table.Table
}

func (m *fakeManager) set(t table.Table) {
	m.mu.Lock()
	m.current = t
	m.mu.Unlock()
}

func (m *fakeManager) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	m.mu.Lock()
	if q.Get("watch") == "1" {
		v, _ := strconv.ParseUint(q.Get("version"), 10, 64)
		deadline := time.Now().Add(2 * time.Second)
		for m.current.Version == v && time.Now().Before(deadline) {
			m.mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			m.mu.Lock()
		}
	}
	t := m.current
	m.mu.Unlock()
	json.NewEncoder(w).Encode(t)
}

// TestWatchManagerAppliesVersions: the switch applies the manager's table
// and every later version, and skips invalid ones.
func TestWatchManagerAppliesVersions(t *testing.T) {
	m := &fakeManager{}
	t1 := *switchtest.Table()
	m.set(t1)
	srv := httptest.NewServer(m)
	defer srv.Close()
	applied := make(chan uint64, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go watchManager(ctx, ctlclient.New(srv.URL, ""), func(tb *table.Table) { applied <- tb.Version })
	wait := func(want uint64) {
		t.Helper()
		select {
		case v := <-applied:
			if v != want {
				t.Fatalf("applied version %d, want %d", v, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("version %d never applied", want)
		}
	}
	wait(1)
	bad := *switchtest.Table()
	bad.Version = 2
	bad.Pairs = append(bad.Pairs, bad.Pairs[0]) // duplicate ID: invalid
	m.set(bad)
	t3 := *switchtest.Table()
	t3.Version = 3
	t3.Pairs = t3.Pairs[:1]
	time.Sleep(50 * time.Millisecond)
	m.set(t3)
	wait(3)
}
