package main

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/app/childproc"
	"github.com/dxpu/dxpu/internal/syncbuf"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// daemon starts dxpu's command line as a process of its own (the test
// binary as dxpu) and returns it with its stderr; it is stopped with
// SIGKILL (after SIGCONT) when the test ends.
func daemon(t *testing.T, args ...string) (*exec.Cmd, *syncbuf.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "DXPU_TEST_AS_DXPU=1", "DXPU_TEST_HWM="+filepath.Join(t.TempDir(), "hwm"))
	var errb syncbuf.Buffer
	cmd.Stderr = &errb
	if err := childproc.Start(cmd, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("dxpu %s:\n%s", args[0], errb.String())
		}
	})
	return cmd, &errb
}

// freePorts returns n TCP (or UDP) ports free on 127.0.0.1 just now.
func freePorts(t *testing.T, network string, n int) []uint16 {
	t.Helper()
	var ports []uint16
	for range n {
		var port int
		if network == "udp" {
			c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			port = c.LocalAddr().(*net.UDPAddr).Port
		} else {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			port = l.Addr().(*net.TCPAddr).Port
		}
		ports = append(ports, uint16(port))
	}
	return ports
}

// TestBoxAgentReportsDegraded runs a manager (--degraded-after 300ms), a
// GPU box's agent and a host's agent, each a process, over loopback. With
// a GPU lent, the host's agent stops (SIGSTOP) past --dead-after and
// --degraded-after: the box's agent reports the pair down, and the
// allocation is degraded with the reason. The host's agent resumes
// (SIGCONT): its own bridge declares the link down too, and its agent
// takes the GPU off the host and reports that; the link comes back, the
// host's agent plugs the GPU back in and both report it up: the
// allocation is active again with its GPU still lent, healthy and on the
// host (issue 20: no control-plane action removes a healthy box's GPU).
func TestBoxAgentReportsDegraded(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three daemons")
	}
	timers := []string{"--keepalive", "50ms", "--dead-after", "500ms"}
	l := newAgentLab(t, []string{"--degraded-after", "300ms"}, timers, nil, nil)
	ctx, c, mgr, dir, hostAgent, boxLog, hostLog, mgrLog := l.ctx, l.c, l.mgr, l.dir, l.hostAgent, l.boxLog, l.hostLog, l.mgrLog
	a, err := c.Allocate(ctx, pool.Request{Host: "h1", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	state := func() pool.Allocation { t.Helper(); return l.allocation(t, a.ID) }

	// The host's agent stops: its end of the pair falls silent.
	if err := hostAgent.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, "the allocation degraded", func() bool { return state().State == pool.StateDegraded })
	got := state()
	pair := strconv.Itoa(int(a.GPUs[0].Pair))
	if got.Degraded == nil || !strings.Contains(got.Degraded.Reason, "pair "+pair) || !strings.Contains(got.Degraded.Reason, "reported by box box0") {
		t.Fatalf("degraded allocation %+v, want the pair and who reported it", got.Degraded)
	}
	out, _, err := runDxpu(t, "", "ctl", "--manager", mgr, "--token-file", filepath.Join(dir, "admin.tok"), "alloc", "list")
	if err != nil || !strings.Contains(out, "degraded") || !strings.Contains(out, "reported by box box0") {
		t.Fatalf("ctl alloc list: %v\n%s", err, out)
	}

	// It resumes: the link comes back up. The box's bridge started a new
	// session meanwhile, so the host's bridge sees its link down too (peer
	// silent past --dead-after, or the new session's HELLO): its agent
	// takes the GPU off the host, reports the link down, plugs the GPU
	// back once the link is up and reports that. A host's link-down is no
	// evidence that the GPU failed: it stays lent and healthy.
	if err := hostAgent.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	reported := func(l *syncbuf.Buffer, what string) bool {
		s := l.String()
		return strings.Contains(s, "reported pair link "+what+" to the manager") ||
			strings.Contains(s, "nothing to report\" pair="+pair+" report=link-"+what)
	}
	waitfor.Until(t, "the host's link-down and the box's link-up reports", func() bool {
		return reported(hostLog, "down") && reported(boxLog, "up")
	})
	// Then the host's link-up, after its re-plug (or the GPU taken away,
	// which the checks below refuse).
	waitfor.Until(t, "the host's link-up report", func() bool {
		return reported(hostLog, "up") || len(state().GPUs) == 0
	})
	got = state()
	unhealthy, err := c.GPUs(ctx, "box0", "unhealthy")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != pool.StateActive || got.Degraded != nil || len(got.GPUs) != 1 || got.GPUs[0].GPU != "box0-g0" || len(got.Lost) != 0 || len(unhealthy) != 0 {
		t.Fatalf("after the host's agent resumed: allocation %s (%+v), gpus %v, lost %v, unhealthy GPUs %+v; want it active with its GPU lent and healthy",
			got.State, got.Degraded, got.GPUIDs(), got.Lost, unhealthy)
	}
	if strings.Contains(mgrLog.String(), "gpu failed") {
		t.Fatalf("the manager failed a GPU:\n%s", mgrLog.String())
	}
	// The host has the GPU: its agent's status shows the slot present,
	// BOOT_0 read through the fabric.
	var st struct {
		Slots []struct {
			Pair    uint32 `json:"pair"`
			GPU     string `json:"gpu"`
			Present bool   `json:"present"`
			Boot0   string `json:"boot0"`
			Removed string `json:"removed"`
		} `json:"slots"`
	}
	if code := l.hostCall(t, http.MethodGet, "/agent/v1/status", "", &st); code != http.StatusOK {
		t.Fatalf("host agent status: HTTP %d", code)
	}
	if len(st.Slots) != 1 || st.Slots[0].Pair != a.GPUs[0].Pair || st.Slots[0].GPU != "box0-g0" || !st.Slots[0].Present || st.Slots[0].Boot0 == "" {
		t.Fatalf("host slots %+v, want pair %s's GPU box0-g0 present", st.Slots, pair)
	}
	t.Logf("host agent: surprise removal seen %v, re-plug seen %v", strings.Contains(hostLog.String(), "how=surprise"),
		strings.Contains(hostLog.String(), "gpu back on the host after link up"))
}

// TestBoxAgentUnreachableReportedNotRemoved runs a manager
// (--reconcile-interval 200ms, --unreachable-after 300ms), a box's agent
// and a host's agent, each a process. With a GPU lent, the box's agent is
// killed: past the bound the manager reports box0 unreachable (its box,
// its GPU, the allocation degraded with the reason naming the box), and
// the GPU stays lent and healthy: no control-plane action removes it. The
// agent started again, the box answers (reachable again), reconciliation
// restores its end of the pair and the allocation is active with its GPU.
func TestBoxAgentUnreachableReportedNotRemoved(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three daemons")
	}
	l := newAgentLab(t, []string{"--reconcile-interval", "200ms", "--unreachable-after", "300ms"},
		[]string{"--keepalive", "50ms", "--dead-after", "500ms"}, nil, nil)
	ctx, c, box, boxAgent, boxArgs, mgrLog := l.ctx, l.c, l.box, l.boxAgent, l.boxArgs, l.mgrLog
	a, err := c.Allocate(ctx, pool.Request{Host: "h1", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	state := func() pool.Allocation { t.Helper(); return l.allocation(t, a.ID) }
	boxState := func() pool.Box {
		t.Helper()
		b, err := c.Box(ctx, "box0")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	if err := boxAgent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, "box0 reported unreachable", func() bool { return boxState().Unreachable != nil })
	b := boxState()
	if !strings.Contains(b.Unreachable.Reason, box.AgentURL) || len(b.GPUs) != 1 || b.GPUs[0].Unreachable == nil ||
		b.GPUs[0].Health != pool.Healthy || b.GPUs[0].Allocation != a.ID {
		t.Fatalf("box0 with its agent killed: %+v (GPUs %+v), want unreachable naming %s, its GPU healthy and lent to %s", b.Unreachable, b.GPUs, box.AgentURL, a.ID)
	}
	got := state()
	if got.State != pool.StateDegraded || got.Degraded == nil || !strings.Contains(got.Degraded.Reason, "box box0") || len(got.GPUs) != 1 {
		t.Fatalf("allocation with box0 unreachable: %s %+v %v", got.State, got.Degraded, got.GPUIDs())
	}

	daemon(t, boxArgs...) // the box's agent again
	waitfor.Until(t, "box0 reachable and the allocation active", func() bool {
		return boxState().Unreachable == nil && state().State == pool.StateActive
	})
	got = state()
	unhealthy, err := c.GPUs(ctx, "box0", "unhealthy")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.GPUs) != 1 || got.GPUs[0].GPU != "box0-g0" || len(got.Lost) != 0 || len(unhealthy) != 0 {
		t.Fatalf("after box0's agent came back: allocation gpus %v, lost %v, unhealthy %+v; want its GPU lent and healthy", got.GPUIDs(), got.Lost, unhealthy)
	}
	if s := mgrLog.String(); strings.Contains(s, "gpu failed") || !strings.Contains(s, "box agent unreachable") || !strings.Contains(s, "box agent answers again") {
		t.Fatalf("manager log: want box0 reported unreachable and back, no GPU failed:\n%s", s)
	}
}
