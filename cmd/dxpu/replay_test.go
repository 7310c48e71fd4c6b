package main

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"
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
