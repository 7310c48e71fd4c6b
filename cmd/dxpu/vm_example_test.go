package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/bridge/vmm/qemuproxy"
	"github.com/dxpu/dxpu/internal/app/vm"
	"github.com/dxpu/dxpu/internal/syncbuf"
)

// vmRunExample returns the two command lines of `dxpu vm run`'s help
// example, as words after "dxpu": the GPU side's bridge and vm run.
func vmRunExample(t *testing.T) (bridgeArgs, runArgs []string) {
	t.Helper()
	ex := newVMRunCmd(newEnv(nil, nil, nil, nil, noEnv)).Example
	for _, line := range strings.Split(ex, "\n") {
		words := strings.Fields(strings.TrimSuffix(strings.TrimSpace(line), "&"))
		switch {
		case len(words) > 2 && words[0] == "dxpu" && words[1] == "bridge":
			bridgeArgs = words[1:]
		case len(words) > 3 && words[0] == "dxpu" && words[1] == "vm" && words[2] == "run":
			runArgs = words[1:]
		}
	}
	if bridgeArgs == nil || runArgs == nil {
		t.Fatalf("vm run's example lacks a dxpu bridge or dxpu vm run line:\n%s", ex)
	}
	return bridgeArgs, runArgs
}

// gpuFlag returns the --gpu value of vm run's words.
func gpuFlag(t *testing.T, runArgs []string) string {
	t.Helper()
	for i, w := range runArgs {
		if w == "--gpu" && i+1 < len(runArgs) {
			return runArgs[i+1]
		}
		if v, ok := strings.CutPrefix(w, "--gpu="); ok {
			return v
		}
	}
	t.Fatalf("no --gpu in %v", runArgs)
	return ""
}

// writePairKey writes the example's pair key file, pair1.key, in the
// working directory (the test's own temporary one).
func writePairKey(t *testing.T) {
	t.Helper()
	t.Chdir(t.TempDir())
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(0x40 + i)
	}
	if err := os.WriteFile("pair1.key", key, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestVMRunExampleAgrees: the two commands of `dxpu vm run --help`'s
// example, parsed as printed, name the same pair and key file, crossed
// addresses, and the same key generation (vm run used to seal with
// generation 0 while `dxpu bridge --key-file` seals with 1: the link never
// came up).
func TestVMRunExampleAgrees(t *testing.T) {
	writePairKey(t)
	bridgeArgs, runArgs := vmRunExample(t)
	bc := newBridgeCmd(newEnv(nil, nil, nil, nil, noEnv))
	if err := bc.ParseFlags(bridgeArgs[1:]); err != nil {
		t.Fatalf("%v: %v", bridgeArgs, err)
	}
	fl := bc.Flags()
	gen, _ := fl.GetUint32("key-generation")
	pair, _ := fl.GetUint32("pair")
	listen, _ := fl.GetString("listen")
	peer, _ := fl.GetString("peer")
	keyFile, _ := fl.GetString("key-file")
	spec := gpuFlag(t, runArgs)
	sp, err := vm.ParseGPUSpec(spec, false)
	if err != nil {
		t.Fatal(err)
	}
	if sp.KeyGeneration != gen {
		t.Errorf("vm run seals with key generation %d, the GPU side's bridge with %d", sp.KeyGeneration, gen)
	}
	if sp.Pair != pair || sp.Listen.String() != peer || sp.Peer.String() != listen || !strings.Contains(spec, "key="+keyFile) {
		t.Errorf("vm run --gpu %s does not pair with bridge --pair %d --listen %s --peer %s --key-file %s", spec, pair, listen, peer, keyFile)
	}
}

// freeUDPPorts returns two UDP ports free on 127.0.0.1 just now.
func freeUDPPorts(t *testing.T) (a, b string) {
	t.Helper()
	var ports []string
	for range 2 {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, strconv.Itoa(c.LocalAddr().(*net.UDPAddr).Port))
		defer c.Close()
	}
	return ports[0], ports[1]
}

// runExamplePair runs the example's GPU-side bridge (the dxpu bridge
// command, in this process) and vm run's host-side bridge for its --gpu
// (a RemoteGPU, without QEMU: the link comes up before QEMU is served),
// on free ports instead of 7001 and 7002, with extra words added to the
// bridge's command line and to --gpu. It returns both sides' logs and a
// channel that gets the host side's Serve error; cancel stops both.
func runExamplePair(t *testing.T, ctx context.Context, bridgeExtra []string, gpuExtra string) (gpuLog, hostLog *syncbuf.Buffer, served <-chan error) {
	t.Helper()
	writePairKey(t)
	bridgeArgs, runArgs := vmRunExample(t)
	p1, p2 := freeUDPPorts(t)
	ports := strings.NewReplacer(":7001", ":"+p1, ":7002", ":"+p2)
	for i, w := range bridgeArgs {
		bridgeArgs[i] = ports.Replace(w)
	}
	spec := ports.Replace(gpuFlag(t, runArgs)) + gpuExtra
	gpuLog, hostLog = &syncbuf.Buffer{}, &syncbuf.Buffer{}
	bridgeDone := make(chan error, 1)
	go func() {
		_, err := execute(ctx, "", gpuLog, append(bridgeArgs, bridgeExtra...)...)
		bridgeDone <- err
	}()
	g, err := vm.ParseGPU(spec, false)
	if err != nil {
		t.Fatal(err)
	}
	g.Log = slog.New(slog.NewTextHandler(hostLog, nil))
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fds[0]), "server")
	nc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	qemuEnd := os.NewFile(uintptr(fds[1]), "qemu")
	res := make(chan error, 1)
	go func() { res <- g.Serve(ctx, qemuproxy.NewConn(nc.(*net.UnixConn))) }()
	t.Cleanup(func() {
		qemuEnd.Close()
		if err := <-bridgeDone; err != nil {
			t.Errorf("dxpu %v: %v", bridgeArgs, err)
		}
		t.Logf("GPU side:\n%s\nhost side:\n%s", gpuLog, hostLog)
	})
	return gpuLog, hostLog, res
}

// TestVMRunExampleLinkUp: the example's two commands, as printed (ports
// aside), bring the pair's link up on both sides with no key generation
// mismatch logged.
func TestVMRunExampleLinkUp(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	gpuLog, hostLog, served := runExamplePair(t, ctx, nil, "")
	for what, seen := range map[string]<-chan struct{}{
		"host side link-up": hostLog.Await("event=\"link-up"),
		"GPU side link-up":  gpuLog.Await("event=\"link-up"),
	} {
		select {
		case <-seen:
		case err := <-served:
			t.Fatalf("waiting for the %s: vm's host-side bridge returned %v", what, err)
		case <-ctx.Done():
			t.Fatalf("no %s", what)
		}
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("host side: %v", err)
	}
	if strings.Contains(gpuLog.String()+hostLog.String(), "mismatch") {
		t.Error("a key generation mismatch was logged on a pair that came up")
	}
}

// TestVMRunKeyGenerationMismatch: a GPU side told another key generation
// than vm run's drops every frame as dropped_unknown_key; both ends say so
// in their logs with both numbers, and vm run's link-up error names it.
func TestVMRunKeyGenerationMismatch(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	gpuLog, hostLog, served := runExamplePair(t, ctx, []string{"--key-generation", "5"}, "")
	const (
		atGPU  = "key generation mismatch: peer seals with generation 1, this end has 5"
		atHost = "key generation mismatch: peer seals with generation 5, this end has 1"
	)
	for what, seen := range map[string]<-chan struct{}{"GPU side": gpuLog.Await(atGPU), "host side": hostLog.Await(atHost)} {
		select {
		case <-seen:
		case <-ctx.Done():
			t.Fatalf("the %s logged no key generation mismatch", what)
		}
	}
	err := <-served
	if !errors.Is(err, vm.ErrLinkDown) || !strings.Contains(err.Error(), atHost) {
		t.Errorf("host side: %v, want ErrLinkDown naming %q", err, atHost)
	}
	// Rate-limited: one line per 10 s, whatever the frame rate (hundreds
	// a second), so two at most within the 10 s link-up wait.
	if n := strings.Count(hostLog.String(), "msg=\""+atHost); n > 2 {
		t.Errorf("the host side logged the mismatch %d times within its 10 s link-up wait", n)
	}
}
