package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/dxpu/dxpu/internal/waitfor"
)

// TestChaosKilledLeavesNoDaemons: `dxpu chaos` killed with SIGKILL (no
// handler runs: a CI timeout, the OOM killer) takes its daemons with it.
// They used to live on (their logs go to files, so no broken pipe ends
// them either), holding their ports and the namespace addresses.
func TestChaosKilledLeavesNoDaemons(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a campaign's six daemons; skipped under -short")
	}
	dir, err := dxpuBin()
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(filepath.Join(dir, "dxpu"), "chaos", "--duration", "5m", "--seed", "1", "--dir", t.TempDir())
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Wait()
	defer c.Process.Kill()
	var daemons []int
	waitfor.Progress(t, "the campaign to start its manager, switch and agents", func() (bool, uint64) {
		daemons = childrenOf(c.Process.Pid)
		return len(daemons) >= 4, uint64(len(daemons))
	})
	defer func() {
		for _, pid := range daemons {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}()
	if err := c.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	c.Wait()
	for _, pid := range daemons {
		waitfor.Until(t, fmt.Sprintf("daemon %d to die with the campaign", pid), func() bool { return !alive(pid, "dxpu") })
	}
}

// procStat returns the fields of /proc/pid/stat after the command name,
// and that name; nil when there is no such process.
func procStat(pid int) ([]string, string) {
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, ""
	}
	s := string(st)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return nil, ""
	}
	return strings.Fields(s[end+1:]), s[open+1 : end]
}

// alive reports whether process pid, named comm, runs (not a zombie, and
// its PID not taken by another command since).
func alive(pid int, comm string) bool {
	f, name := procStat(pid)
	return len(f) > 0 && f[0] != "Z" && name == comm
}

// childrenOf lists the live processes whose parent is pid.
func childrenOf(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var kids []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f, _ := procStat(p); len(f) > 1 && f[0] != "Z" && f[1] == strconv.Itoa(pid) {
			kids = append(kids, p)
		}
	}
	return kids
}
