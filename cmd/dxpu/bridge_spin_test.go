package main

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/internal/waitfor"
)

// TestBridgeSpin runs a pair as shipped with --spin on both sides: each
// says it spins, and 4 KiB written through the host side's NetTLP adapter
// read back whole.
func TestBridgeSpin(t *testing.T) {
	t.Parallel()
	ports := freePorts(t, "udp", 2)
	hostUDP, gpuUDP := fmt.Sprintf("127.0.47.10:%d", ports[0]), fmt.Sprintf("127.0.47.11:%d", ports[1])
	adapter, load := netip.MustParseAddr("127.0.47.1"), netip.MustParseAddr("127.0.47.2")
	common := []string{"--insecure-no-keys", "--pair", "6", "--spin", "200us", "--dead-after", "5s", "--completion-timeout", "5s"}
	_, gpuLog := daemon(t, append([]string{"bridge", "--role", "gpu", "--listen", gpuUDP, "--peer", hostUDP, "--pcie", "memory"}, common...)...)
	_, hostLog := daemon(t, append([]string{"bridge", "--role", "host", "--listen", hostUDP, "--peer", gpuUDP,
		"--pcie", "nettlp:" + adapter.String() + ":" + load.String()}, common...)...)
	waitfor.Until(t, "both bridges running", func() bool {
		return strings.Contains(gpuLog.String(), "bridge running") && strings.Contains(hostLog.String(), "bridge running")
	})
	for side, log := range map[string]string{"gpu": gpuLog.String(), "host": hostLog.String()} {
		if !strings.Contains(log, "spin=200us") {
			t.Errorf("the %s side's start line does not say spin=200us:\n%s", side, log)
		}
	}
	const addr = 0x2000000000 // --mem-base's default
	want := make([]byte, 4096)
	for i := range want {
		want[i] = byte(i*5 + 3)
	}
	c := pairCarrying(t, load, adapter, addr, want, 256)
	got := make([]byte, len(want))
	if n, err := c.Read(addr, got); err != nil || n != len(got) || !bytes.Equal(got, want) {
		t.Fatalf("4 KiB read with both sides spinning: %d bytes (%v), equal %v", n, err, bytes.Equal(got, want))
	}
}
