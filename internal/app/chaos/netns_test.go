package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/privtest"
)

// TestNetNSNeedsRoot: without root the namespace mode refuses with one line
// that says so and points at loopback mode.
func TestNetNSNeedsRoot(t *testing.T) {
	err := RequireRoot(1000)
	if !errors.Is(err, ErrNamespaces) || !strings.Contains(err.Error(), "without --netns") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("euid 1000: %v", err)
	}
	if err := RequireRoot(0); err != nil {
		t.Fatalf("euid 0: %v", err)
	}
}

// TestNetNSCampaign runs a 20s campaign with every daemon in a namespace of
// its own, the campaign's clients, observer and cables in another: the
// daemons' only addresses are on veths to the bridge, so every copy that
// comes back intact crossed real interfaces. No violation, and afterwards
// nothing is left: no process in any of the campaign's namespaces, no name
// in `ip netns list`, no link added here.
func TestNetNSCampaign(t *testing.T) {
	privtest.Short(t, "a 20s campaign of six daemons in network namespaces")
	privtest.NetNS(t)
	bin := filepath.Join(t.TempDir(), "dxpu")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/dxpu/dxpu/cmd/dxpu").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	nsBefore, linksBefore := ipList(t, "netns", "list"), ipList(t, "-o", "link")
	var inodes []uint64
	nsCreated = func(in []uint64) { inodes = in }
	defer func() { nsCreated = nil }()
	rep, err := Run(context.Background(), Options{Dxpu: bin, Duration: 20 * time.Second, Seed: 3, NetNS: true, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(inodes) != len(nsNodes)+1 {
		t.Fatalf("%d namespaces made, want %d (the daemons', the campaign's, the wire)", len(inodes), len(nsNodes)+1)
	}
	if rep.Operations == 0 || rep.OperationsByName["copy"].OK == 0 || rep.Observations == 0 || rep.Faults != len(rep.Schedule) {
		t.Fatalf("the campaign did not run: %d operations (%v), %d observations, %d faults", rep.Operations, rep.OperationsByName, rep.Observations, rep.Faults)
	}
	t.Logf("seed 3 in namespaces: %d operations (%d copies intact), faults %v, converged %v (worst %v), %d violations",
		rep.Operations, rep.OperationsByName["copy"].OK, rep.FaultsByKind, rep.Converged, rep.WorstConverge, len(rep.Violations))
	for _, v := range rep.Violations {
		t.Errorf("violation %s %s at %v: %s\n    %s", v.Kind, v.Subject, v.At, v.Message, strings.Join(v.Excerpt, "\n    "))
	}
	if !rep.Converged {
		t.Error("the deployment did not converge after the nemesis stopped")
	}
	if held := processesIn(inodes); len(held) > 0 {
		t.Errorf("processes left in the campaign's namespaces: %v", held)
	}
	// Others may add namespaces and links on this machine meanwhile: what
	// counts is none new that the campaign could have made.
	if added := newNames(nsBefore, ipList(t, "netns", "list")); len(added) > 0 {
		t.Errorf("ip netns list has new names: %v", added)
	}
	ours := func(n string) bool {
		return strings.HasPrefix(n, "c-") || strings.HasPrefix(n, "br0") || strings.HasPrefix(n, "eth0@")
	}
	if added := slices.DeleteFunc(newNames(linksBefore, ipList(t, "-o", "link")), func(n string) bool { return !ours(n) }); len(added) > 0 {
		t.Errorf("links left here: %v", added)
	}
}

func newNames(before, after []string) []string {
	return slices.DeleteFunc(after, func(n string) bool { return slices.Contains(before, n) })
}

// ipList is ip's output, one name a line (the first word, or the second
// for `ip -o link`: "1: lo: ...").
func ipList(t *testing.T, args ...string) []string {
	out, err := exec.Command("ip", args...).Output()
	if err != nil {
		t.Fatalf("ip %v: %v", args, err)
	}
	var names []string
	for l := range strings.Lines(string(out)) {
		f := strings.Fields(l)
		switch {
		case len(f) > 1 && args[0] == "-o":
			names = append(names, f[1])
		case len(f) > 0:
			names = append(names, f[0])
		}
	}
	return names
}

// processesIn lists the processes other than this one whose network
// namespace is one of inodes. This one is left out: netns.New runs on a
// locked thread that exits with its goroutine, but when that thread is the
// main one the Go runtime parks it for good instead, in the namespace,
// until the process exits (a CLI run does at once).
func processesIn(inodes []uint64) []string {
	var held []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if e.Name() == "self" || e.Name() == "thread-self" || e.Name() == strconv.Itoa(os.Getpid()) {
			continue
		}
		ns, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns", "net"))
		if err != nil {
			continue
		}
		for _, in := range inodes {
			if ns == fmt.Sprintf("net:[%d]", in) {
				held = append(held, e.Name())
			}
		}
	}
	return held
}

// TestVMHostCampaign runs a 30s namespace campaign whose host2 is a VM
// host (a TCG guest its agent boots): seed 81 restarts host2 and, while the
// new guest boots, takes its API out (a credential replaced and SIGHUP: a
// SIGHUP then ended the agent and nothing converged) and rekeys its
// allocations. The VM host's pairs are held to DefaultVMBounds, the
// others to DefaultBounds; no violation.
func TestVMHostCampaign(t *testing.T) {
	privtest.Short(t, "a 30s campaign with a QEMU guest as a host")
	privtest.NetNS(t)
	privtest.Tool(t, "qemu-system-x86_64")
	dir := t.TempDir()
	bin := filepath.Join(dir, "dxpu")
	for _, b := range [][2]string{{bin, "./cmd/dxpu"}, {filepath.Join(dir, "dxpu-guest"), "./cmd/dxpu-guest"}} {
		cmd := exec.Command("go", "build", "-o", b[0], "github.com/dxpu/dxpu/"+strings.TrimPrefix(b[1], "./"))
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b[1], err, out)
		}
	}
	rep, err := Run(context.Background(), Options{Dxpu: bin, Duration: 30 * time.Second, Seed: 81, NetNS: true, VMHost: true, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if rep.FaultsByKind[FaultRestart] == 0 || rep.FaultsByKind[FaultAPIOutage] == 0 || rep.OperationsByName["alloc"].OK == 0 || rep.HostBounds[vmHost] != DefaultVMBounds {
		t.Fatalf("the campaign did not run as planned: operations %v, faults %v, host bounds %v", rep.OperationsByName, rep.FaultsByKind, rep.HostBounds)
	}
	t.Logf("seed 81 with a VM host: %d operations, faults %v, converged %v (worst %v), %d violations",
		rep.Operations, rep.FaultsByKind, rep.Converged, rep.WorstConverge, len(rep.Violations))
	for _, v := range rep.Violations {
		t.Errorf("violation %s %s at %v: %s\n    %s", v.Kind, v.Subject, v.At, v.Message, strings.Join(v.Excerpt, "\n    "))
	}
	if !rep.Converged {
		t.Error("the deployment did not converge after the nemesis stopped")
	}
}
