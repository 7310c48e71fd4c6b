package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/internal/app/cpuset"
	"github.com/dxpu/dxpu/internal/waitfor"
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
