package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/tlp"
)

func TestBridgeParsePCIe(t *testing.T) {
	sp, err := parsePCIe("nettlp:127.0.0.2:127.0.0.1:127.0.0.3")
	if err != nil || sp.kind != "nettlp" || sp.local != netip.MustParseAddr("127.0.0.2") ||
		sp.remote != netip.MustParseAddr("127.0.0.1") || sp.dma != netip.MustParseAddr("127.0.0.3") {
		t.Fatalf("%+v, %v", sp, err)
	}
	if sp, err := parsePCIe("nettlp:127.0.0.2:127.0.0.1"); err != nil || sp.dma.IsValid() {
		t.Fatalf("%+v, %v", sp, err)
	}
	for _, s := range []string{"", "nettlp", "nettlp:127.0.0.2", "nettlp:0.0.0.0:127.0.0.1", "nettlp:::1:127.0.0.1",
		"nettlp:127.0.0.2:127.0.0.1:x", "nettlp:1:2:3:4:5", "gpu"} {
		if _, err := parsePCIe(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

// TestBridgeCommandFlags: bad flags give exit code 2 and name the flag.
func TestBridgeCommandFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--role", "middle"}, "--role"},
		{[]string{"--role", "host", "--listen", "x"}, "--listen"},
		{[]string{"--role", "host", "--listen", "127.0.42.10:1", "--peer", "127.0.42.11:1", "--pcie", "pci"}, "--pcie"},
		{[]string{"--role", "host", "--listen", "127.0.42.10:1", "--peer", "127.0.42.11:1", "--pcie", "emu-gpu"}, "--role host takes"},
		{[]string{"--role", "gpu", "--listen", "127.0.42.10:1", "--peer", "127.0.42.11:1", "--pcie", "nettlp:127.0.42.1:127.0.42.2"}, "--role gpu takes"},
	} {
		bridgeFlags.listen, bridgeFlags.peer, bridgeFlags.pcie = "", "", ""
		rootCmd.SetArgs(append([]string{"bridge"}, tc.args...))
		err := rootCmd.Execute()
		var ec exitCodeError
		if !errors.As(err, &ec) || ec.code != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want exit code 2 naming %q", tc.args, err, tc.want)
		}
	}
	rootCmd.SetArgs(nil)
}

// TestBridgeDaemonsNetTLP runs two `dxpu bridge` daemons in-process, a
// host side with a NetTLP PCIe side and a GPU side with an emulated GPU,
// and drives them with a libtlp-like client: MMIO to the GPU's registers
// and VRAM lands and returns, and the metrics count it.
func TestBridgeDaemonsNetTLP(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base := func(o bridgeOptions) bridgeOptions {
		o.pair, o.keepalive, o.deadAfter, o.completionTimeout = 9, 100*time.Millisecond, 5*time.Second, 5*time.Second
		o.gpuModel = gpu.H100SXM
		return o
	}
	hostUDP, gpuUDP := netip.MustParseAddrPort("127.0.42.10:17001"), netip.MustParseAddrPort("127.0.42.11:17001")
	bridgeAddr, hostAddr := netip.MustParseAddr("127.0.42.1"), netip.MustParseAddr("127.0.42.2")
	daemons := make(chan *bridgeDaemon, 2)
	done := make(chan error, 2)
	go func() {
		done <- runBridge(ctx, base(bridgeOptions{role: bridge.RoleGPU, listen: gpuUDP, peer: hostUDP,
			pcie: pcieSpec{kind: "emu-gpu"}, ready: func(d *bridgeDaemon) { daemons <- d }}))
	}()
	go func() {
		done <- runBridge(ctx, base(bridgeOptions{role: bridge.RoleHost, listen: hostUDP, peer: gpuUDP,
			pcie: pcieSpec{kind: "nettlp", local: bridgeAddr, remote: hostAddr}, metrics: "127.0.42.10:0",
			ready: func(d *bridgeDaemon) { daemons <- d }}))
	}()
	var host *bridgeDaemon
	for range 2 {
		select {
		case d := <-daemons:
			if d.host != nil {
				host = d
			}
		case err := <-done:
			t.Skipf("a bridge did not start: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatal("bridges did not start")
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for host.runner.State() != bridge.StateUp {
		if time.Now().After(deadline) {
			t.Fatal("pair not up after 10s")
		}
		time.Sleep(time.Millisecond)
	}

	c, err := nettlp.Dial(hostAddr, bridgeAddr, 1, tlp.NewID(0, 0, 0))
	if err != nil {
		t.Skip(err)
	}
	defer c.Close()
	c.Timeout = 5 * time.Second
	const bar0, bar1 = 0x9000_0000, 0x20_0000_0000
	var w [4]byte
	if _, err := c.Read(bar0+gpu.RegBoot0, w[:]); err != nil {
		t.Fatal(err)
	}
	if got := binary.LittleEndian.Uint32(w[:]); got != gpu.H100SXM.Boot0 {
		t.Fatalf("BOOT_0 %#x through the daemons, want %#x", got, gpu.H100SXM.Boot0)
	}
	want := make([]byte, 1024)
	for i := range want {
		want[i] = byte(i*5 + 3)
	}
	if _, err := c.WriteAligned(bar1+0x2000, want, 256); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	if n, err := c.Read(bar1+0x2000, got); err != nil || n != len(got) || !bytes.Equal(got, want) {
		t.Fatalf("VRAM read back %d bytes (%v), equal %v", n, err, bytes.Equal(got, want))
	}

	resp, err := http.Get("http://" + host.metricsAddr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{`dxpu_bridge_tlps_sent_total{pair="9",role="host"}`, `dxpu_nettlp_datagrams_total{pair="9",role="host"}`} {
		i := bytes.Index(body, []byte(m))
		if i < 0 {
			t.Fatalf("metric %s missing", m)
		}
		line := string(body[i+len(m):])
		line = strings.TrimSpace(line[:strings.IndexByte(line, '\n')])
		if line == "0" {
			t.Fatalf("metric %s is 0", m)
		}
	}

	cancel()
	for range 2 {
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("bridge stopped with %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a bridge did not stop after cancel")
		}
	}
}

// FuzzBridgeParsePCIe: whatever --pcie holds, parsePCIe returns a known
// kind or an error naming the flag; an accepted nettlp spec has specific
// IPv4 addresses and formats back to a string that parses the same.
func FuzzBridgeParsePCIe(f *testing.F) {
	for _, s := range []string{"emu-gpu", "memory", "nettlp:127.0.0.2:127.0.0.1", "nettlp:127.0.0.2:127.0.0.1:127.0.0.3", "nettlp::", "nettlp:1.2.3.4:::"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sp, err := parsePCIe(s)
		if err != nil {
			if !strings.Contains(err.Error(), "--pcie") {
				t.Fatalf("%q: error %v does not name the flag", s, err)
			}
			return
		}
		switch sp.kind {
		case "emu-gpu", "memory":
			if s != sp.kind {
				t.Fatalf("%q parsed as %q", s, sp.kind)
			}
			return
		case "nettlp":
		default:
			t.Fatalf("%q: kind %q", s, sp.kind)
		}
		if !sp.local.Is4() || !sp.remote.Is4() || sp.local.IsUnspecified() || sp.remote.IsUnspecified() ||
			(sp.dma.IsValid() && (!sp.dma.Is4() || sp.dma.IsUnspecified())) {
			t.Fatalf("%q: accepted %+v", s, sp)
		}
		back := "nettlp:" + sp.local.String() + ":" + sp.remote.String()
		if sp.dma.IsValid() {
			back += ":" + sp.dma.String()
		}
		if sp2, err := parsePCIe(back); err != nil || sp2 != sp {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", s, sp, back, sp2, err)
		}
	})
}
