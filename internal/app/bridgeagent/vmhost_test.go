package bridgeagent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/udp"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/manager/agentapi"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/app/bridgeagent"
	"github.com/dxpu/dxpu/internal/app/vm"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// startProc runs bin with args in dir (no namespace), its output kept as
// a proc's lines; it is killed at the end of the test.
func startProc(t *testing.T, name, bin, dir string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	return runProc(t, name, cmd, nil)
}

// field returns the value of key=VALUE in a slog text line.
func field(t *testing.T, line, key string) string {
	t.Helper()
	m := regexp.MustCompile(`(?:^| )` + regexp.QuoteMeta(key) + `=("(?:[^"\\]|\\.)*"|\S+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no %s= in %q", key, line)
	}
	if v, err := strconv.Unquote(m[1]); err == nil {
		return v
	}
	return m[1]
}

// guestEvents returns the guest tool's events named name in the serial
// log, in order.
func guestEvents(t *testing.T, serial, name string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(serial)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(string(b), "\n") {
		j, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "DXPU-EVENT ")
		var ev map[string]any
		if ok && json.Unmarshal([]byte(j), &ev) == nil && ev["event"] == name {
			out = append(out, ev)
		}
	}
	return out
}

// hostStatus reads the agent's status with its credential.
func hostStatus(t *testing.T, ctx context.Context, url, cred string) bridgeagent.Status {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/agent/v1/status", nil)
	req.Header.Set("Authorization", "Bearer "+cred)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st bridgeagent.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("agent status: HTTP %d, %v", resp.StatusCode, err)
	}
	return st
}

// qemuUsing lists the processes whose command line mentions dir (the
// guest's files): after a clean shutdown, none.
func qemuUsing(dir string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), dir) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// TestVMHostUnderManager: a host agent whose host is a QEMU guest (dxpu
// bridge agent --role host --vm, a process), a GPU box's agent with an
// emulated H100 and the manager (in this process), over loopback UDP. One
// guest boots for the whole sequence:
//
//  1. ctl alloc: the saga's hot-add puts the GPU into the running guest
//     (device_add); the guest's tool sees 10de:2330 appear and reads its
//     BOOT_0 through the fabric; the agent's status shows the slot.
//  2. ctl free: device_del; the guest sees the function go.
//  3. alloc again, then the box's agent dies: the host agent removes the
//     GPU from the guest (a surprise removal), reports the link down, and
//     the allocation is degraded, its GPU still lent and healthy. The
//     box's agent restarts: the reconciler restores its pair and the host
//     agent puts the GPU back into the guest.
//  4. SIGTERM: the agent exits 0, the guest is powered off, no QEMU left.
func TestVMHostUnderManager(t *testing.T) {
	bin := buildVMHostBins(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cl, err := agentapi.NewClient(agentapi.ClientConfig{AllowInsecure: true})
	if err != nil {
		t.Fatal(err)
	}
	const admin = "admin-token-for-the-vm-test"
	m, err := manager.New(manager.Config{Token: admin, GPUBridge: agentapi.GPUSide{Client: cl}, HostBridge: agentapi.HostSide{Client: cl},
		AllowInsecureAgents: true, ReconcileInterval: -1, StepTimeout: 30 * time.Second, DegradedAfter: time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	msrv := httptest.NewServer(m.Handler())
	defer func() { msrv.Close(); m.Close() }()
	c := ctlclient.New(msrv.URL, admin)

	// The GPU box: an in-process agent with one emulated H100, started
	// again (empty, on the same ports) by startBox after it died.
	box := pool.Box{ID: "box0", GPUs: []pool.GPU{{ID: "box0-g0", Model: "H100", MemoryMiB: 80 << 10, BDF: "0000:18:00.0"}}}
	var (
		boxAgent   *bridgeagent.Agent
		killBox    context.CancelFunc
		boxHandler atomic.Pointer[http.Handler]
	)
	startBox := func(listen netip.AddrPort, cred string) {
		bctx, kill := context.WithCancel(ctx)
		a, err := bridgeagent.Start(bctx, bridgeagent.Options{Role: bridge.RoleGPU, Box: &box, Insecure: true, Log: quiet,
			Listen: listen, DeadAfter: 2 * time.Second, CompletionTimeout: 2 * time.Second, Credential: cred})
		if err != nil {
			kill()
			t.Fatal(err)
		}
		boxAgent, killBox = a, kill
		h := a.Handler()
		boxHandler.Store(&h)
	}
	startBox(netip.MustParseAddrPort("127.0.0.1:0"), "")
	bsrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*boxHandler.Load()).ServeHTTP(w, r) }))
	defer func() { killBox(); bsrv.Close(); boxAgent.Wait() }()
	box.AgentURL = bsrv.URL
	box.Bridge = pool.Endpoint{SwitchPort: "p2", MAC: "02:00:00:00:00:02", IP: "127.0.0.1", UDPPort: boxAgent.DataPlane().Port()}
	_, boxCred, err := c.RegisterBoxAgent(ctx, box)
	if err != nil {
		t.Fatal(err)
	}
	boxAgent.SetCredential(boxCred)

	// The host: `dxpu bridge agent --role host --vm`, on ports it picks;
	// registered once it serves, its credential then given by SIGHUP.
	host, guestDir, credFile := startVMHostAgent(t, bin, "--manager", msrv.URL, "--dead-after", "2s", "--completion-timeout", "2s", "--memory-mb", "512")
	up := host.waitLines(t, 1, `msg="host guest up"`)[0]
	running := host.waitLines(t, 1, `msg="bridge agent running"`)[0]
	api := "http://" + strings.TrimPrefix(field(t, host.waitLines(t, 1, `msg="agent API serving"`)[0], "url"), "http://")
	dataPlane := netip.MustParseAddrPort(field(t, running, "data_plane"))
	_, hostCred, err := c.RegisterHostAgent(ctx, pool.Host{ID: "h1", Ports: 32, AgentURL: api,
		Bridge: pool.Endpoint{SwitchPort: "p1", MAC: "02:00:00:00:00:01", IP: "127.0.0.1", UDPPort: dataPlane.Port()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(credFile, []byte(hostCred+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	host.cmd.Process.Signal(syscall.SIGHUP)
	host.waitLines(t, 1, "SIGHUP: agent credential reloaded")
	st := hostStatus(t, ctx, api, hostCred)
	if st.Guest == nil || st.Guest.Accel != "tcg" || st.Guest.BootS <= 0 || len(st.Slots) != 0 {
		t.Fatalf("status of the idle guest host: %+v", st)
	}
	serial := st.Guest.SerialLog
	t.Logf("guest booted to its watcher in %.1f s (%s; %s)", st.Guest.BootS, field(t, up, "accel"), serial)

	// 1. alloc: the GPU appears in the guest, which reads BOOT_0.
	boot0 := fmt.Sprintf("%#08x", gpu.H100SXM.Boot0)
	t0 := time.Now()
	a, err := c.Allocate(ctx, pool.Request{Host: "h1", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	allocTook := time.Since(t0)
	as := a.GPUs[0]
	var slot bridgeagent.Slot
	for _, s := range hostStatus(t, ctx, api, hostCred).Slots {
		if s.Pair == as.Pair {
			slot = s
		}
	}
	if !slot.Present || slot.Port != as.HostPort || slot.GPU != "box0-g0" || slot.Vendor != "0x10de" || slot.Device != "0x2330" ||
		slot.Boot0 != boot0 || slot.BDF == "" || slot.BAR0 == "" {
		t.Fatalf("after alloc the guest host's slot is %+v", slot)
	}
	added := guestEvents(t, serial, "added")
	if len(added) != 1 || added[0]["bdf"] != slot.BDF || added[0]["vendor"] != "10de" || added[0]["device"] != "2330" ||
		added[0]["class"] != "0302" || added[0]["boot0"] != boot0 {
		t.Fatalf("the guest's own events: %v, want 10de:2330 class 0302 at %s with BOOT_0 %s", added, slot.BDF, boot0)
	}
	seen := host.waitLines(t, 1, `msg="gpu enumerated"`, "in_guest=true")[0]
	t.Logf("alloc -> GPU seen in the guest (BOOT_0 %s read at %s): ctl alloc took %v, device_add to the guest's report %s ms",
		slot.Boot0, slot.BDF, allocTook.Round(time.Millisecond), field(t, seen, "seen_ms"))

	// 2. free: device_del, the guest sees it go.
	t0 = time.Now()
	if _, err := c.Free(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	freeTook := time.Since(t0)
	st = hostStatus(t, ctx, api, hostCred)
	if len(st.Pairs) != 0 || len(st.Slots) != 1 || st.Slots[0].Present || st.Slots[0].Removed != bridgeagent.RemovedHotRemove {
		t.Fatalf("after free: pairs %+v, slots %+v", st.Pairs, st.Slots)
	}
	if gone := guestEvents(t, serial, "removed"); len(gone) != 1 || gone[0]["bdf"] != slot.BDF {
		t.Fatalf("the guest reported removals %v, want %s", gone, slot.BDF)
	}
	removed := host.waitLines(t, 1, `msg="gpu removed"`, "how=hot-remove")[0]
	t.Logf("free -> GPU gone from the guest: ctl free took %v, device_del to the guest's report %s ms",
		freeTook.Round(time.Millisecond), field(t, removed, "gone_ms"))

	// 3. alloc again; the box's agent dies: surprise removal in the guest,
	// the allocation degraded, the GPU still lent and healthy (a silent
	// link is no evidence that it failed). The box's agent comes back
	// empty: the reconciler restores its pair, the link comes up and the
	// host's agent puts the GPU back into the guest (device_add again).
	a, err = c.Allocate(ctx, pool.Request{Host: "h1", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	host.waitLines(t, 2, `msg="gpu enumerated"`, "in_guest=true")
	killBox()
	boxAgent.Wait()
	host.waitLines(t, 1, `msg="gpu removed"`, "gpu=box0-g0", "how=surprise")
	host.waitLines(t, 1, "reported pair link down to the manager")
	if gone := guestEvents(t, serial, "removed"); len(gone) != 2 {
		t.Fatalf("the guest reported removals %v, want a second one", gone)
	}
	gs, err := c.GPUs(ctx, "box0", "unhealthy")
	if err != nil || len(gs) != 0 {
		t.Fatalf("unhealthy GPUs after the box died: %+v, %v; want none", gs, err)
	}
	waitfor.Until(t, "the allocation degraded", func() bool {
		got, err := c.Allocation(ctx, a.ID)
		return err == nil && got.State == pool.StateDegraded
	})
	if got, err := c.Allocation(ctx, a.ID); err != nil || len(got.GPUs) != 1 || len(got.Lost) != 0 {
		t.Fatalf("allocation after the box died: %+v, %v; want its GPU still lent", got, err)
	}
	for _, s := range hostStatus(t, ctx, api, hostCred).Slots {
		if s.Pair == a.GPUs[0].Pair && (s.Present || s.Removed != bridgeagent.RemovedSurprise || !strings.Contains(s.Reason, "link down")) {
			t.Fatalf("the silent GPU's slot: %+v", s)
		}
	}
	startBox(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), box.Bridge.UDPPort), boxCred)
	if err := m.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	host.waitLines(t, 1, `msg="gpu back on the host after link up"`, "gpu=box0-g0")
	host.waitLines(t, 3, `msg="gpu enumerated"`, "in_guest=true")
	host.waitLines(t, 1, "reported pair link up to the manager")
	if got, err := c.Allocation(ctx, a.ID); err != nil || got.State != pool.StateActive || len(got.GPUs) != 1 || len(got.Lost) != 0 {
		t.Fatalf("allocation after the box came back: %+v, %v; want it active with its GPU", got, err)
	}
	if added := guestEvents(t, serial, "added"); len(added) != 3 || added[2]["boot0"] != boot0 {
		t.Fatalf("the guest's own events: %v, want a third 10de:2330 with BOOT_0 %s", added, boot0)
	}
	for _, s := range hostStatus(t, ctx, api, hostCred).Slots {
		if s.Pair == a.GPUs[0].Pair && (!s.Present || s.Boot0 != boot0) {
			t.Fatalf("the GPU's slot after the box came back: %+v", s)
		}
	}

	// 4. SIGTERM: the guest goes, then the agent; nothing left running.
	host.stop(t, syscall.SIGTERM)
	if code := host.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("the agent exited %d after SIGTERM", code)
	}
	host.waitLines(t, 1, "host guest powered off")
	if left := qemuUsing(guestDir); len(left) != 0 {
		t.Fatalf("still running after the agent stopped: %q", left)
	}
}

// buildVMHostBins skips without QEMU, a kernel and busybox, then builds
// dxpu and, next to it, a static dxpu-guest (found there as 'dxpu vm'
// finds it) into a directory it returns.
func buildVMHostBins(t *testing.T) string {
	t.Helper()
	privtest.Tool(t, "qemu-system-x86_64")
	privtest.File(t, "/boot/vmlinuz-*")
	privtest.File(t, "/bin/busybox")
	if _, err := vm.CheckQEMU(t.Context(), ""); err != nil {
		t.Fatal(err) // present but unusable: a configuration error
	}
	bin := t.TempDir()
	for _, b := range []struct{ out, pkg string }{{"dxpu", "./cmd/dxpu"}, {"dxpu-guest", "./cmd/dxpu-guest"}} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(bin, b.out), b.pkg)
		cmd.Dir, cmd.Env = "../../..", append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b.pkg, err, out)
		}
	}
	return bin
}

// startVMHostAgent starts `dxpu bridge agent --role host --vm` (bin's) as
// host h1 on ports it picks, unregistered (its credential file, returned,
// holds a placeholder), a TCG guest in guestDir, with the extra flags. The
// guest's serial log is printed when the test fails.
func startVMHostAgent(t *testing.T, bin string, extra ...string) (host *proc, guestDir, credFile string) {
	t.Helper()
	dir := t.TempDir()
	guestDir = filepath.Join(dir, "guest")
	credFile = filepath.Join(dir, "h1.cred")
	if err := os.WriteFile(credFile, []byte("not-registered-yet\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(guestDir, 0o700); err != nil { // vm refuses a --dir others may enter
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(guestDir, "serial.log")); err == nil {
				t.Logf("--- guest serial log:\n%s", b)
			}
		}
	})
	args := append([]string{"bridge", "agent", "--role", "host", "--vm", "--host-id", "h1",
		"--agent-listen", "127.0.0.1:0", "--insecure", "--agent-credential-file", credFile, "--listen", "127.0.0.1:0",
		"--kernel", privtest.File(t, "/boot/vmlinuz-*"), "--busybox", privtest.File(t, "/bin/busybox"), "--accel", "tcg", "--dir", guestDir}, extra...)
	host = startProc(t, "host agent", filepath.Join(bin, "dxpu"), dir, args...)
	// A TCG boot on a loaded machine prints nothing for a long time: the
	// guest's serial log growing and QEMU's CPU time are progress too.
	// Once the guest's tool has exited nothing more will come, however
	// long QEMU idles on: say so instead of waiting (a stress run waited 17
	// minutes on a tool that had exited).
	host.progress = func() int64 {
		var p int64
		if b, err := os.ReadFile(filepath.Join(guestDir, "serial.log")); err == nil {
			if i := strings.LastIndex(string(b), "DXPU-EXIT "); i >= 0 {
				t.Fatalf("the guest's tool exited; its serial log ends:\n%s", b[max(0, i-600):])
			}
			p += int64(len(b))
		}
		return p + childrenCPUTicks(host.cmd.Process.Pid)
	}
	return host, guestDir, credFile
}

// TestVMHostLosesItsGuest: a VM host agent (a process, no manager) whose
// QEMU is killed does not go on serving as if it had a host: it exits 1
// with one line saying the guest is lost and how QEMU died, so that its
// supervisor starts it again with a fresh guest and the manager meanwhile
// finds it unreachable.
func TestVMHostLosesItsGuest(t *testing.T) {
	bin := buildVMHostBins(t)
	host, guestDir, _ := startVMHostAgent(t, bin, "--memory-mb", "256")
	host.waitLines(t, 1, `msg="agent API serving"`)
	var qemu []string // the agent's command line names the guest's files too
	for _, p := range qemuUsing(guestDir) {
		if strings.Contains(p, "qemu-system-x86_64 ") {
			qemu = append(qemu, p)
		}
	}
	if len(qemu) != 1 {
		t.Fatalf("the guest's QEMU: %q, want one process", qemu)
	}
	pid, err := strconv.Atoi(strings.SplitN(qemu[0], ":", 2)[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	agent := host.cmd.Process.Pid
	waitfor.Progress(t, "the agent exiting after its guest's QEMU was killed", func() (bool, uint64) {
		select {
		case <-host.done:
			return true, 0
		default:
			return false, waitfor.ProcessCPU(agent)
		}
	})
	if code := host.cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("the agent exited %d after its guest died, want 1", code)
	}
	host.waitLines(t, 1, "the host guest is lost", "the guest died", "signal: killed")
}

// TestVMHostWithoutQEMU: a guest host whose QEMU is missing fails to
// start with ErrQEMUMissing, and gives its data-plane socket back.
func TestVMHostWithoutQEMU(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	listen := netip.MustParseAddrPort("127.0.0.1:0")
	probe, err := udp.ListenMux(listen)
	if err != nil {
		t.Fatal(err)
	}
	listen = probe.LocalAddr()
	probe.Close()
	_, err = bridgeagent.Start(ctx, bridgeagent.Options{Role: bridge.RoleHost, Listen: listen,
		VM: &vm.Options{QEMU: filepath.Join(t.TempDir(), "no-qemu-here")}})
	if !errors.Is(err, vm.ErrQEMUMissing) || !strings.Contains(err.Error(), "host guest") {
		t.Fatalf("Start with a missing QEMU: %v", err)
	}
	again, err := udp.ListenMux(listen)
	if err != nil {
		t.Fatalf("the data plane %v stayed bound after the failed start: %v", listen, err)
	}
	again.Close()
}

// childrenCPUTicks is the CPU time (clock ticks) of pid's children, as
// /proc says: what a daemon's QEMU has done.
func childrenCPUTicks(pid int) int64 {
	var sum int64
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, c := range strings.Fields(string(b)) {
			stat, err := os.ReadFile("/proc/" + c + "/stat")
			if err != nil {
				continue
			}
			// Fields after the command's closing parenthesis: utime and
			// stime are the 12th and 13th.
			rest := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
			if len(rest) > 12 {
				u, _ := strconv.ParseInt(rest[11], 10, 64)
				s, _ := strconv.ParseInt(rest[12], 10, 64)
				sum += u + s
			}
		}
	}
	return sum
}
