package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/internal/app/cpuset"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/tlp"
)

// TestBridgeCommandFlags: bad flags give exit code 2 and name the flag.
// The daemon runs under a deadline: a validation that regresses lets it
// start, and the test fails instead of hanging.
func TestBridgeCommandFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--role", "middle"}, "--role"},
		{[]string{"--role", "host", "--listen", "x"}, "--listen"},
		{[]string{"--role", "host", "--listen", "127.0.42.10:1", "--peer", "127.0.42.11:1", "--pcie", "pci"}, "--pcie"},
		{[]string{"--role", "host", "--listen", "127.0.42.10:1", "--peer", "127.0.42.11:1", "--pcie", "emu-gpu"}, "--role host takes"},
		{[]string{"--role", "gpu", "--listen", "127.0.42.10:1", "--peer", "127.0.42.11:1", "--pcie", "nettlp:127.0.42.1:127.0.42.2"}, "--role gpu takes"},
		{[]string{"--role", "gpu", "--listen", "127.0.42.10:1", "--peer", "127.0.42.11:1", "--pcie", "memory", "--mem-size", "lots"}, "--mem-size"},
	} {
		_, _, err := runDxpu(t, "", append([]string{"bridge"}, tc.args...)...)
		var ec exitCodeError
		if !errors.As(err, &ec) || ec.code != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want exit code 2 naming %q", tc.args, err, tc.want)
		}
	}
}

// TestBridgeCPUs starts the daemon as shipped with --cpus and reads every
// thread's CPU list from /proc: all of them run on the one CPU asked for.
// A --cpus that does not parse, or names a CPU the process may not use,
// exits 2 naming the flag.
func TestBridgeCPUs(t *testing.T) {
	t.Parallel()
	allowed := cpuset.Allowed()
	cpu := strconv.Itoa(allowed[len(allowed)-1])
	ports := freePorts(t, "udp", 2)
	cmd, errb := daemon(t, "bridge", "--role", "gpu", "--pair", "1", "--insecure-no-keys", "--pcie", "memory",
		"--listen", fmt.Sprintf("127.0.0.1:%d", ports[0]), "--peer", fmt.Sprintf("127.0.0.1:%d", ports[1]), "--cpus", cpu)
	waitfor.Until(t, "the bridge running", func() bool { return strings.Contains(errb.String(), "bridge running") })
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", cmd.Process.Pid, task.Name()))
		if err != nil {
			continue // the thread exited
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok && strings.TrimSpace(v) != cpu {
				t.Errorf("thread %s runs on CPUs %s, want %s", task.Name(), strings.TrimSpace(v), cpu)
			}
		}
	}
	if len(tasks) < 2 {
		t.Errorf("%d threads: the daemon should run several", len(tasks))
	}
	for _, bad := range []string{"3-1", "x", "1023"} {
		_, _, err := runDxpu(t, "", "bridge", "--role", "gpu", "--insecure-no-keys", "--pcie", "memory",
			"--listen", "127.0.42.10:1", "--peer", "127.0.42.11:1", "--cpus", bad)
		var ec exitCodeError
		if !errors.As(err, &ec) || ec.code != 2 || !strings.Contains(err.Error(), "--cpus") {
			t.Errorf("--cpus %s: %v, want exit code 2 naming --cpus", bad, err)
		}
	}
}

// TestBridgeSizes runs a pair as shipped, two `dxpu bridge` processes with
// jumbo frames (--mtu 8972), --max-payload 2048 and a memory device with
// --mps 2048, and reads 4 KiB through the host side's NetTLP adapter: the
// data comes back whole, and the GPU side sent it as 2 completions (the
// default 256-byte MPS makes 16). Against a host side left at
// --max-payload 512 the GPU side answers with 512-byte completions and logs
// why.
func TestBridgeSizes(t *testing.T) {
	t.Parallel()
	ports := freePorts(t, "udp", 2)
	metrics := freePorts(t, "tcp", 1)
	hostUDP, gpuUDP := fmt.Sprintf("127.0.46.10:%d", ports[0]), fmt.Sprintf("127.0.46.11:%d", ports[1])
	adapter, load := netip.MustParseAddr("127.0.46.1"), netip.MustParseAddr("127.0.46.2")
	sizes := []string{"--insecure-no-keys", "--pair", "5", "--mtu", "8972", "--max-payload", "2048", "--dead-after", "5s", "--completion-timeout", "5s"}
	_, gpuLog := daemon(t, append([]string{"bridge", "--role", "gpu", "--listen", gpuUDP, "--peer", hostUDP, "--pcie", "memory", "--mps", "2048",
		"--metrics", fmt.Sprintf("127.0.0.1:%d", metrics[0])}, sizes...)...)
	_, hostLog := daemon(t, append([]string{"bridge", "--role", "host", "--listen", hostUDP, "--peer", gpuUDP,
		"--pcie", "nettlp:" + adapter.String() + ":" + load.String()}, sizes...)...)
	waitfor.Until(t, "both bridges running", func() bool {
		return strings.Contains(gpuLog.String(), "bridge running") && strings.Contains(hostLog.String(), "bridge running")
	})
	const addr = 0x2000000000 // --mem-base's default
	want := make([]byte, 4096)
	for i := range want {
		want[i] = byte(i*7 + 1)
	}
	c := pairCarrying(t, load, adapter, addr, want, 2048)
	sentBefore := gpuTLPsSent(t, metrics[0])
	got := make([]byte, len(want))
	if n, err := c.Read(addr, got); err != nil || n != len(got) || !bytes.Equal(got, want) {
		t.Fatalf("4 KiB read: %d bytes (%v), equal %v", n, err, bytes.Equal(got, want))
	}
	if n := gpuTLPsSent(t, metrics[0]) - sentBefore; n != 2 {
		t.Errorf("the GPU side answered a 4 KiB read with %v TLPs, want 2 completions of 2048 bytes (--mps 2048)", n)
	}

	// A host side left at --max-payload 512 cannot take those completions:
	// the GPU side follows its peer, as PCIe enumeration sets a device's
	// MPS to what its path takes, and says so.
	ports = freePorts(t, "udp", 2)
	metrics = freePorts(t, "tcp", 1)
	hostUDP, gpuUDP = fmt.Sprintf("127.0.46.10:%d", ports[0]), fmt.Sprintf("127.0.46.11:%d", ports[1])
	adapter, load = netip.MustParseAddr("127.0.46.3"), netip.MustParseAddr("127.0.46.4")
	_, gpuLog = daemon(t, append([]string{"bridge", "--role", "gpu", "--listen", gpuUDP, "--peer", hostUDP, "--pcie", "memory", "--mps", "2048",
		"--metrics", fmt.Sprintf("127.0.0.1:%d", metrics[0])}, sizes...)...)
	_, _ = daemon(t, "bridge", "--role", "host", "--listen", hostUDP, "--peer", gpuUDP, "--pcie", "nettlp:"+adapter.String()+":"+load.String(),
		"--insecure-no-keys", "--pair", "5", "--mtu", "8972", "--dead-after", "5s", "--completion-timeout", "5s")
	c2, err := nettlp.Dial(load, adapter, 1, tlp.NewID(0, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c2.Timeout = 5 * time.Second
	waitfor.Until(t, "the second pair carrying a write and a read", func() bool {
		var w [4]byte
		_, werr := c2.WriteAligned(addr, want, 512)
		_, rerr := c2.Read(addr, w[:])
		return werr == nil && rerr == nil && bytes.Equal(w[:], want[:4])
	})
	sentBefore = gpuTLPsSent(t, metrics[0])
	clear(got)
	if n, err := c2.Read(addr, got); err != nil || n != len(got) || !bytes.Equal(got, want) {
		t.Fatalf("4 KiB read from a host side at --max-payload 512: %d bytes (%v), equal %v", n, err, bytes.Equal(got, want))
	}
	if n := gpuTLPsSent(t, metrics[0]) - sentBefore; n != 8 {
		t.Errorf("facing a host side at --max-payload 512 the GPU side answered a 4 KiB read with %v TLPs, want 8 of 512 bytes", n)
	}
	if line := `completions follow it" mps_bytes=512 configured_mps_bytes=2048 peer_max_payload_bytes=512`; !strings.Contains(gpuLog.String(), line) {
		t.Errorf("the GPU side's log lacks %q:\n%s", line, gpuLog.String())
	}
}

// gpuTLPsSent scrapes dxpu_bridge_tlps_sent_total from the GPU side's
// /metrics on port.
func gpuTLPsSent(t *testing.T, port uint16) float64 {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	const m = `dxpu_bridge_tlps_sent_total{pair="5",role="gpu"} `
	i := bytes.Index(body, []byte(m))
	if i < 0 {
		t.Fatalf("metric %s missing", m)
	}
	line, _, _ := strings.Cut(string(body[i+len(m):]), "\n")
	v, err := strconv.ParseFloat(strings.TrimSpace(line), 64)
	if err != nil {
		t.Fatalf("metric %s: %q", m, line)
	}
	return v
}

// pairCarrying dials the host side's NetTLP adapter from load (closed at
// the test's end) and writes want at addr, chunk bytes a write, until a
// read of the first word returns it: until the pair is up the host side
// answers UR.
func pairCarrying(t *testing.T, load, adapter netip.Addr, addr uint64, want []byte, chunk int) *nettlp.Client {
	t.Helper()
	c, err := nettlp.Dial(load, adapter, 1, tlp.NewID(0, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.Timeout = 5 * time.Second
	waitfor.Until(t, "the pair carrying a write and a read", func() bool {
		var w [4]byte
		_, werr := c.WriteAligned(addr, want, chunk)
		_, rerr := c.Read(addr, w[:])
		return werr == nil && rerr == nil && bytes.Equal(w[:], want[:4])
	})
	return c
}
