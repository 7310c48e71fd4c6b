package bridged

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
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/tlp"
)

func TestParsePCIe(t *testing.T) {
	t.Parallel()
	sp, err := ParsePCIe("nettlp:127.0.0.2:127.0.0.1:127.0.0.3")
	if err != nil || sp.Kind != KindNetTLP || sp.Local != netip.MustParseAddr("127.0.0.2") ||
		sp.Remote != netip.MustParseAddr("127.0.0.1") || sp.DMA != netip.MustParseAddr("127.0.0.3") {
		t.Fatalf("%+v, %v", sp, err)
	}
	if sp, err := ParsePCIe("nettlp:127.0.0.2:127.0.0.1"); err != nil || sp.DMA.IsValid() {
		t.Fatalf("%+v, %v", sp, err)
	}
	for _, s := range []string{"", "nettlp", "nettlp:127.0.0.2", "nettlp:0.0.0.0:127.0.0.1", "nettlp:::1:127.0.0.1",
		"nettlp:127.0.0.2:127.0.0.1:x", "nettlp:1:2:3:4:5", "gpu"} {
		if _, err := ParsePCIe(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

// TestRoleAndPCIeMismatch: a side that cannot serve the role is a usage
// error, found before anything binds.
func TestRoleAndPCIeMismatch(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addr := netip.MustParseAddrPort("127.0.42.20:1")
	for _, tc := range []struct {
		role bridge.Role
		pcie PCIe
		want string
	}{
		{bridge.RoleHost, PCIe{Kind: KindEmuGPU}, "--role host takes"},
		{bridge.RoleHost, PCIe{Kind: KindMemory}, "--role host takes"},
		{bridge.RoleGPU, PCIe{Kind: KindNetTLP, Local: netip.MustParseAddr("127.0.42.21"), Remote: netip.MustParseAddr("127.0.42.22")}, "--role gpu takes"},
		{bridge.RoleGPU, PCIe{}, "--role gpu takes"},
	} {
		err := Run(ctx, Options{Role: tc.role, Pair: 1, Listen: addr, Peer: addr, PCIe: tc.pcie, Insecure: true})
		if !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v with %q: %v, want a usage error naming %q", tc.role, tc.pcie.Kind, err, tc.want)
		}
	}
}

// TestUnkeyedDaemonRefused: a daemon without a pair key refuses to run
// unless told it is a lab.
func TestUnkeyedDaemonRefused(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addr := netip.MustParseAddrPort("127.0.42.30:1")
	err := Run(ctx, Options{Role: bridge.RoleGPU, Pair: 1, Listen: addr, Peer: addr, PCIe: PCIe{Kind: KindMemory}, MemSize: 4096})
	if !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), "--key-file") {
		t.Fatalf("unkeyed daemon: %v", err)
	}
}

// TestDaemonsNetTLP runs two bridge daemons (keyed), a host side with a NetTLP
// PCIe side and a GPU side with an emulated GPU, and drives them with a
// libtlp-like client: MMIO to the GPU's registers and VRAM lands and
// returns, and the metrics count it. The addresses (127.0.42.1-11) are
// this test's alone; binding them needs no privilege on Linux, so any
// error is a failure.
func TestDaemonsNetTLP(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	base := func(o Options) Options {
		o.Pair, o.Keepalive, o.DeadAfter, o.CompletionTimeout = 9, 100*time.Millisecond, 5*time.Second, 5*time.Second
		o.GPUModel = gpu.H100SXM
		o.Key = bytes.Repeat([]byte{0x5a}, 32) // keyed, as daemons run
		return o
	}
	hostUDP, gpuUDP := netip.MustParseAddrPort("127.0.42.10:17001"), netip.MustParseAddrPort("127.0.42.11:17001")
	bridgeAddr, hostAddr := netip.MustParseAddr("127.0.42.1"), netip.MustParseAddr("127.0.42.2")
	daemons := make(chan *Daemon, 2)
	done := make(chan error, 2)
	go func() {
		done <- Run(ctx, base(Options{Role: bridge.RoleGPU, Listen: gpuUDP, Peer: hostUDP,
			PCIe: PCIe{Kind: KindEmuGPU}, Ready: func(d *Daemon) { daemons <- d }}))
	}()
	go func() {
		done <- Run(ctx, base(Options{Role: bridge.RoleHost, Listen: hostUDP, Peer: gpuUDP,
			PCIe: PCIe{Kind: KindNetTLP, Local: bridgeAddr, Remote: hostAddr}, Metrics: "127.0.42.10:0",
			Ready: func(d *Daemon) { daemons <- d }}))
	}()
	stopped := 0
	defer func() { // the daemons must stop when ctx ends, whatever failed
		cancel()
		for ; stopped < 2; stopped++ {
			<-done
		}
	}()
	var host *Daemon
	for range 2 {
		select {
		case d := <-daemons:
			if d.host != nil {
				host = d
			}
		case err := <-done:
			stopped++
			t.Fatalf("a bridge did not start: %v", err)
		case <-ctx.Done():
			t.Fatal("bridges did not start within the test's deadline")
		}
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for host.State() != bridge.StateUp {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("pair not up within the test's deadline (state %v)", host.State())
		}
	}

	c, err := nettlp.Dial(hostAddr, bridgeAddr, 1, tlp.NewID(0, 0, 0))
	if err != nil {
		t.Fatal(err)
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

	resp, err := http.Get("http://" + host.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The timer's lateness is there, whatever it is (0 on an idle machine).
	for _, m := range []string{`dxpu_bridge_timer_late_total{pair="9",role="host"}`, `dxpu_bridge_timer_late_max_seconds{pair="9",role="host"}`} {
		if !bytes.Contains(body, []byte(m)) {
			t.Errorf("metric %s missing", m)
		}
	}
	for _, m := range []string{`dxpu_bridge_tlps_sent_total{pair="9",role="host"}`, `dxpu_nettlp_datagrams_total{pair="9",role="host"}`,
		`dxpu_bridge_frames_sealed_total{pair="9",role="host"}`, `dxpu_bridge_frames_opened_total{pair="9",role="host"}`} {
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
	for ; stopped < 2; stopped++ {
		if err := <-done; err != nil {
			t.Errorf("bridge stopped with %v", err)
		}
	}
}

// FuzzParsePCIe: whatever --pcie holds, ParsePCIe returns a known kind or
// an error naming the flag; an accepted nettlp spec has specific IPv4
// addresses and formats back to a string that parses the same.
func FuzzParsePCIe(f *testing.F) {
	for _, s := range []string{"emu-gpu", "memory", "nettlp:127.0.0.2:127.0.0.1", "nettlp:127.0.0.2:127.0.0.1:127.0.0.3", "nettlp::", "nettlp:1.2.3.4:::"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sp, err := ParsePCIe(s)
		if err != nil {
			if !strings.Contains(err.Error(), "--pcie") {
				t.Fatalf("%q: error %v does not name the flag", s, err)
			}
			return
		}
		switch sp.Kind {
		case KindEmuGPU, KindMemory:
			if s != sp.Kind {
				t.Fatalf("%q parsed as %q", s, sp.Kind)
			}
			return
		case KindNetTLP:
		default:
			t.Fatalf("%q: kind %q", s, sp.Kind)
		}
		if !sp.Local.Is4() || !sp.Remote.Is4() || sp.Local.IsUnspecified() || sp.Remote.IsUnspecified() ||
			(sp.DMA.IsValid() && (!sp.DMA.Is4() || sp.DMA.IsUnspecified())) {
			t.Fatalf("%q: accepted %+v", s, sp)
		}
		back := "nettlp:" + sp.Local.String() + ":" + sp.Remote.String()
		if sp.DMA.IsValid() {
			back += ":" + sp.DMA.String()
		}
		if sp2, err := ParsePCIe(back); err != nil || sp2 != sp {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", s, sp, back, sp2, err)
		}
	})
}

// TestDefaultCompletionTimeout: the host side answers a NetTLP host before
// libtlp's 500 ms run out; the GPU side outlasts an outage the link hides.
func TestDefaultCompletionTimeout(t *testing.T) {
	t.Parallel()
	deadDefault := bridge.Config{}.Defaults().DeadAfter
	for _, c := range []struct {
		role      bridge.Role
		deadAfter time.Duration
		want      time.Duration
	}{
		{bridge.RoleHost, time.Second, 250 * time.Millisecond},
		{bridge.RoleHost, 10 * time.Second, 250 * time.Millisecond},
		{bridge.RoleGPU, time.Second, 2 * time.Second},
		{bridge.RoleGPU, 5 * time.Second, 10 * time.Second},
		{bridge.RoleGPU, 0, 2 * deadDefault},
	} {
		if got := DefaultCompletionTimeout(c.role, c.deadAfter); got != c.want {
			t.Errorf("%v with DeadAfter %v: %v, want %v", c.role, c.deadAfter, got, c.want)
		}
	}
}
