package bridgeagent_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/app/childproc"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/internal/xdptest"
	"github.com/dxpu/dxpu/xdp"
)

// The deployment under test, every daemon a separate dxpu process in its
// own network namespace:
//
//	netns mgr   10.77.0.2  dxpu manager (bbolt store), dxpu ctl
//	netns sw    10.77.N.1  dxpu switch, and the router between the others
//	                       (ip_forward)
//	netns host  10.77.1.2  dxpu bridge agent --role host (emulated host)
//	netns gpu0  10.77.2.2  dxpu bridge agent --role gpu, box0 with 2 GPUs
//	netns gpu1  10.77.3.2  dxpu bridge agent --role gpu, box1 with 1 GPU
//
// Each leaf reaches sw over its own veth (eth0 with MAC 02:77:00:00:00:0N
// in the leaf, s-LEAF at 10.77.N.1 in sw); the s-LEAF are the switch's
// ports. Agents send their dxpu datagrams to 10.77.N.1:8855. In xdp mode
// the XDP program on s-host, s-gpu0 and s-gpu1 takes them there and
// redirects them, rewritten, out of the far bridge's port (source
// 10.77.M.1:8855, so the far agent sees its own --switch address); the
// leaves' eth0 run a pass program, since a veth drops frames redirected
// into it unless its peer runs XDP, and send with TX checksum offload off
// (as onto a wire: the switch forwards the bytes it gets, and a veth's
// unfinished checksum would arrive unfinished). In udp mode a relay socket on :8855
// in sw does the same in user space.

// proc is one daemon: its output lines, kept and streamed.
type proc struct {
	name  string
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	more  chan struct{} // signalled on every new line
	done  chan struct{}
	// progress, when set, measures work the process does without printing
	// (a guest's serial log growing while it boots): waitLines takes a
	// change in it as progress too.
	progress func() int64
}

// deployment holds the namespaces and the files of one test.
type deployment struct {
	t      *testing.T
	bin    string
	dir    string
	ns     map[string]xdptest.NS
	mgrURL string
}

func (d *deployment) path(name string) string { return filepath.Join(d.dir, name) }

// start runs the dxpu binary with args inside namespace ns.
func (d *deployment) start(ns, name string, args ...string) *proc {
	d.t.Helper()
	cmd := exec.Command(d.bin, args...)
	cmd.Dir = d.dir
	// The child inherits the namespace of the thread that forks it.
	return runProc(d.t, name, cmd, d.ns[ns].Enter)
}

// runProc starts cmd (childproc.Start: it dies with the test binary,
// enter run on the forking thread first), its output kept as a proc's
// lines; it is killed at the end of the test, its output logged if the
// test failed.
func runProc(t *testing.T, name string, cmd *exec.Cmd, enter func() error) *proc {
	t.Helper()
	p := &proc{name: name, cmd: cmd, more: make(chan struct{}, 1), done: make(chan struct{})}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := childproc.Start(cmd, enter); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	w.Close()
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
			select {
			case p.more <- struct{}{}:
			default:
			}
		}
		r.Close()
		cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			p.mu.Lock()
			t.Logf("--- %s output:\n%s", name, strings.Join(p.lines, "\n"))
			p.mu.Unlock()
		}
	})
	return p
}

// waitLines waits until n lines containing every one of parts have been
// printed; it fails when none has come for a while (progress stalls) or the
// process exits first.
func (p *proc) waitLines(t *testing.T, n int, parts ...string) []string {
	t.Helper()
	const stall = 30 * time.Second
	for {
		p.mu.Lock()
		var got []string
		for _, l := range p.lines {
			ok := true
			for _, s := range parts {
				ok = ok && strings.Contains(l, s)
			}
			if ok {
				got = append(got, l)
			}
		}
		p.mu.Unlock()
		if len(got) >= n {
			return got
		}
		var before int64
		if p.progress != nil {
			before = p.progress()
		}
		t0 := time.NewTimer(stall)
		select {
		case <-p.more:
			t0.Stop()
		case <-p.done:
			t0.Stop()
			t.Fatalf("%s exited before printing %d lines with %q (got %d)", p.name, n, parts, len(got))
		case <-t0.C:
			if p.progress != nil && p.progress() != before {
				continue
			}
			t.Fatalf("%s made no progress for %v while waiting for %d lines with %q (got %d)", p.name, stall, n, parts, len(got))
		}
	}
}

// stop ends a daemon with sig and waits for it.
func (p *proc) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	p.cmd.Process.Signal(sig)
	// Stuck is not exiting while using no CPU; a slow exit under load is
	// not.
	pid := p.cmd.Process.Pid
	waitfor.Progress(t, fmt.Sprintf("%s exiting after %v", p.name, sig), func() (bool, uint64) {
		select {
		case <-p.done:
			return true, 0
		default:
			return false, waitfor.ProcessCPU(pid)
		}
	})
}

// ctl runs `dxpu ctl` in the manager's namespace and returns its stdout.
func (d *deployment) ctl(args ...string) []byte {
	d.t.Helper()
	cmd := exec.Command(d.bin, append([]string{"ctl", "--manager", d.mgrURL, "--token-file", d.path("admin.tok"), "--timeout", "60s"}, args...)...)
	cmd.Dir = d.dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := d.ns["mgr"].Do(func() error { return cmd.Run() }); err != nil {
		d.t.Fatalf("dxpu ctl %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.Bytes()
}

// leafMAC is the fixed MAC of leaf i's eth0, the one registered for its
// bridge: the XDP switch accepts a pair's frames only from it.
func leafMAC(i int) net.HardwareAddr { return net.HardwareAddr{0x02, 0x77, 0, 0, 0, byte(i)} }

// network builds the namespaces: sw routes between the others, each leaf
// on its own /24 (10.77.N.0/24, sw at .1, the leaf at .2) over its own
// veth (MTU 1500: native XDP on veth needs <= 3506).
func (d *deployment) network(leaves []string) {
	d.t.Helper()
	d.ns = map[string]xdptest.NS{"sw": xdptest.NewNS(d.t, "sw")}
	err := d.ns["sw"].Do(func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
	})
	if err != nil {
		d.t.Fatal(err)
	}
	for i, leaf := range leaves {
		d.ns[leaf] = xdptest.NewNS(d.t, leaf)
		swName := "s-" + leaf
		err := d.ns["sw"].Do(func() error {
			la := netlink.NewLinkAttrs()
			la.Name, la.MTU = swName, 1500
			if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "eth0", PeerHardwareAddr: leafMAC(i), PeerNamespace: netlink.NsFd(d.ns[leaf].Handle)}); err != nil {
				return err
			}
			return up(swName, fmt.Sprintf("10.77.%d.1/24", i))
		})
		if err == nil {
			err = d.ns[leaf].Do(func() error {
				if err := up("eth0", fmt.Sprintf("10.77.%d.2/24", i)); err != nil {
					return err
				}
				return netlink.RouteAdd(&netlink.Route{Gw: net.IPv4(10, 77, byte(i), 1)})
			})
		}
		if err != nil {
			d.t.Fatalf("namespace %s: %v", leaf, err)
		}
	}
}

// passOnLeaves attaches the pass program to the leaves' eth0, so that
// frames the XDP switch redirects into their veths are delivered.
func (d *deployment) passOnLeaves(leaves []string) {
	d.t.Helper()
	for _, leaf := range leaves {
		err := d.ns[leaf].Do(func() error {
			ifc, err := net.InterfaceByName("eth0")
			if err != nil {
				return err
			}
			if err := disableTXChecksum("eth0"); err != nil {
				return err
			}
			l, _, err := xdp.AttachPass(ifc.Index)
			if err == nil {
				d.t.Cleanup(func() { l.Close() })
			}
			return err
		})
		if err != nil {
			d.t.Fatalf("pass program on %s's eth0: %v", leaf, err)
		}
	}
}

func up(name, cidr string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	a, err := netlink.ParseAddr(cidr)
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(l, a); err != nil {
		return err
	}
	return netlink.LinkSetUp(l)
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDeployment runs the control plane and the data plane as an operator
// would: `ctl alloc` makes the GPUs appear on the host, `ctl free` removes
// them, a GPU box whose daemon is killed is reported by the host's agent
// (surprise removal on the host, the allocation degraded, its GPU still
// lent and healthy: issue 20) and, restarted, gets its pair back from the
// reconciler, the host its GPU back, and a restarted manager restores the
// pairs a restarted host daemon lost.
// It runs once with the XDP switch and once with the UDP relay.
func TestDeployment(t *testing.T) {
	privtest.NetNS(t)
	bin := filepath.Join(t.TempDir(), "dxpu")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/dxpu/dxpu/cmd/dxpu").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Run("xdp", func(t *testing.T) {
		privtest.BPF(t)
		testDeployment(t, bin, "xdp")
	})
	t.Run("udp", func(t *testing.T) { testDeployment(t, bin, "udp") })
}

func testDeployment(t *testing.T, bin, mode string) {
	d := &deployment{t: t, dir: t.TempDir(), bin: bin}
	leaves := []string{"mgr", "host", "gpu0", "gpu1"}
	d.network(leaves)
	if mode == "xdp" {
		d.passOnLeaves(leaves[1:])
	}
	d.mgrURL = "http://10.77.0.2:7700"

	// Secrets: the admin token stays with the manager and ctl; the switch
	// reads the table with a read-only token; each agent gets its own
	// credential from its registration.
	if _, err := manager.CreateTokenFile(d.path("read.tok")); err != nil {
		t.Fatal(err)
	}
	managerArgs := []string{"manager", "--listen", "10.77.0.2:7700", "--store", d.path("pool.db"), "--token-file", d.path("admin.tok"),
		"--init-token", "--read-token-file", d.path("read.tok"), "--allow-insecure-agents", "--reconcile-interval", "2s", "--degraded-after", "1s"}
	mgr := d.start("mgr", "manager", managerArgs...)
	mgr.waitLines(t, 1, "manager serving")

	endpoint := func(i int) pool.Endpoint {
		return pool.Endpoint{SwitchPort: "s-" + leaves[i], MAC: leafMAC(i).String(), IP: fmt.Sprintf("10.77.%d.2", i), UDPPort: 4791}
	}
	agentURL := func(i int) string { return fmt.Sprintf("http://10.77.%d.2:7701", i) }
	writeJSON(t, d.path("h1.json"), pool.Host{ID: "h1", Ports: 32, Bridge: endpoint(1), AgentURL: agentURL(1)})
	for b, n := range []int{2, 1} {
		box := pool.Box{ID: fmt.Sprintf("box%d", b), Bridge: endpoint(2 + b), AgentURL: agentURL(2 + b)}
		for g := range n {
			box.GPUs = append(box.GPUs, pool.GPU{ID: fmt.Sprintf("box%d-g%d", b, g), Model: "H100", MemoryMiB: 80 << 10, BDF: fmt.Sprintf("0000:%02x:00.0", 0x18+g)})
		}
		writeJSON(t, d.path(box.ID+".json"), box)
		d.ctl("box", "add", d.path(box.ID+".json"), "--agent-credential-out", d.path(box.ID+".cred"))
	}
	d.ctl("host", "add", d.path("h1.json"), "--agent-credential-out", d.path("h1.cred"))

	swArgs := []string{"switch", "--mode", mode, "--manager", d.mgrURL, "--token-file", d.path("read.tok"), "--metrics", switchMetricsAddr}
	if mode == "xdp" {
		for _, leaf := range leaves[1:] {
			swArgs = append(swArgs, "--port", "s-"+leaf)
		}
	} else {
		swArgs = append(swArgs, "--udp-listen", "0.0.0.0:8855")
	}
	sw := d.start("sw", "switch", swArgs...)
	sw.waitLines(t, 1, "switch: running", "mode="+mode)
	agentArgs := func(i int, extra ...string) []string {
		return append([]string{"bridge", "agent", "--agent-listen", fmt.Sprintf("10.77.%d.2:7701", i), "--insecure",
			"--listen", fmt.Sprintf("10.77.%d.2:4791", i), "--switch", fmt.Sprintf("10.77.%d.1:8855", i), "--dead-after", "2s"}, extra...)
	}
	hostArgs := agentArgs(1, "--role", "host", "--host-id", "h1", "--agent-credential-file", d.path("h1.cred"), "--manager", d.mgrURL)
	host := d.start("host", "host agent", hostArgs...)
	boxes := []*proc{
		d.start("gpu0", "box0 agent", agentArgs(2, "--role", "gpu", "--box", d.path("box0.json"), "--agent-credential-file", d.path("box0.cred"))...),
		d.start("gpu1", "box1 agent", agentArgs(3, "--role", "gpu", "--box", d.path("box1.json"), "--agent-credential-file", d.path("box1.cred"))...),
	}
	for _, p := range append(boxes, host) {
		p.waitLines(t, 1, "agent API serving")
	}

	alloc := func() pool.Allocation {
		var a pool.Allocation
		if err := json.Unmarshal(d.ctl("--json", "alloc", "--host", "h1", "--count", "3"), &a); err != nil || len(a.GPUs) != 3 {
			t.Fatalf("ctl alloc: %+v, %v", a, err)
		}
		return a
	}
	// 1. ctl alloc: the three GPUs appear on the host, enumerated.
	a := alloc()
	enumerated := host.waitLines(t, 3, `msg="gpu enumerated"`)
	for _, as := range a.GPUs {
		if !slices(enumerated, "gpu="+as.GPU+" ", "vendor=0x10de", fmt.Sprintf("host_port=%d ", as.HostPort), "boot0=0x180000a1") {
			t.Fatalf("no enumeration of %s (vendor 10de, BOOT_0 read) on port %d in %q", as.GPU, as.HostPort, enumerated)
		}
	}
	// The pairs' traffic crossed the switch (in xdp mode the XDP program:
	// the kernel of sw has no socket on :8855), both ways.
	samples, err := d.switchCounters()
	if err != nil {
		t.Fatal(err)
	}
	for _, as := range a.GPUs {
		if toGPU, toHost := pairForwarded(samples, as.Pair); toGPU == 0 || toHost == 0 {
			t.Fatalf("switch (%s) forwarded %v frames to the GPU and %v to the host for pair %d", mode, toGPU, toHost, as.Pair)
		}
	}
	// 1b. ctl rekey: every pair changes to a fresh key on both sides, on
	// the running bridges.
	d.ctl("rekey", a.ID)
	host.waitLines(t, 3, `msg="pair key changed"`)
	// 2. ctl free: they leave the host in order.
	d.ctl("free", a.ID)
	host.waitLines(t, 3, `msg="gpu removed"`, "how=hot-remove")
	host.waitLines(t, 3, `msg="pair removed"`)

	// 3. A GPU box's daemon dies: the host sees a surprise removal, its
	// agent reports the link down, the allocation is degraded past
	// --degraded-after; the GPU stays lent and healthy (a silent link is no
	// evidence that it failed). The daemon comes back empty: the
	// reconciler restores its pair, the link comes up, the host's agent
	// plugs the GPU back in and the allocation is active again.
	a = alloc()
	host.waitLines(t, 6, `msg="gpu enumerated"`)
	box1Args := agentArgs(3, "--role", "gpu", "--box", d.path("box1.json"), "--agent-credential-file", d.path("box1.cred"))
	boxes[1].stop(t, syscall.SIGKILL)
	host.waitLines(t, 1, `msg="gpu removed"`, "gpu=box1-g0", "how=surprise")
	host.waitLines(t, 1, "reported pair link down to the manager")
	mgr.waitLines(t, 1, `msg="allocation degraded: a pair's link stays down"`, "gpu=box1-g0", "reported by host h1")
	var gpus []pool.GPU
	if err := json.Unmarshal(d.ctl("--json", "gpu", "--state", "unhealthy"), &gpus); err != nil || len(gpus) != 0 {
		t.Fatalf("unhealthy GPUs after box1 died: %+v, %v; want none", gpus, err)
	}
	var list []pool.Allocation
	if err := json.Unmarshal(d.ctl("--json", "alloc", "list", "--host", "h1"), &list); err != nil || len(list) != 1 ||
		list[0].State != pool.StateDegraded || len(list[0].GPUs) != 3 || len(list[0].Lost) != 0 {
		t.Fatalf("allocation after box1 died: %+v, %v; want it degraded with its 3 GPUs", list, err)
	}
	boxes[1] = d.start("gpu1", "box1 agent (restarted)", box1Args...)
	mgr.waitLines(t, 1, `msg="reconcile: restoring lost pair"`)
	host.waitLines(t, 1, `msg="gpu back on the host after link up"`, "gpu=box1-g0")
	host.waitLines(t, 7, `msg="gpu enumerated"`)
	host.waitLines(t, 1, "reported pair link up to the manager")
	mgr.waitLines(t, 1, `msg="pair link up again"`, "gpu=box1-g0")
	if err := json.Unmarshal(d.ctl("--json", "alloc", "list", "--host", "h1"), &list); err != nil || len(list) != 1 ||
		list[0].State != pool.StateActive || len(list[0].GPUs) != 3 || len(list[0].Lost) != 0 {
		t.Fatalf("allocation after box1 came back: %+v, %v; want it active with its 3 GPUs", list, err)
	}

	// 4. The manager stops; the host's daemon restarts empty; the manager
	// comes back and restores box0's two GPUs on it from its journal.
	mgr.stop(t, syscall.SIGTERM)
	host.stop(t, syscall.SIGKILL)
	host2 := d.start("host", "host agent (restarted)", hostArgs...)
	host2.waitLines(t, 1, "agent API serving")
	mgr2 := d.start("mgr", "manager (restarted)", managerArgs...)
	mgr2.waitLines(t, 1, "manager serving")
	restored := host2.waitLines(t, 3, `msg="gpu enumerated"`)
	for _, g := range []string{"box0-g0", "box0-g1", "box1-g0"} {
		if !slices(restored, "gpu="+g+" ", "vendor=0x10de") {
			t.Fatalf("the restarted manager did not restore %s on the host: %q", g, restored)
		}
	}
	if err := json.Unmarshal(d.ctl("--json", "alloc", "list", "--host", "h1"), &list); err != nil || len(list) != 1 {
		t.Fatalf("ctl alloc list: %+v, %v", list, err)
	}
	if after := list[0]; after.ID != a.ID || after.State != pool.StateActive || len(after.GPUs) != 3 || len(after.Lost) != 0 {
		t.Fatalf("allocation after the restart: %+v", after)
	}
}

// slices reports whether some line contains every part.
func slices(lines []string, parts ...string) bool {
	for _, l := range lines {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(l, p)
		}
		if ok {
			return true
		}
	}
	return false
}
