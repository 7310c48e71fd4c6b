// Package examples holds the operator's walk-through (README.md) and the
// files it registers; its test runs the walk-through in network namespaces.
package examples

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// machines are the walk-through's machines and their addresses on the one
// fabric segment (10.77.0.0/24).
var machines = map[string]string{
	"manager": "10.77.0.1",
	"switch":  "10.77.0.2",
	"host":    "10.77.0.10",
	"gpu-box": "10.77.0.20",
}

// step is one fenced shell block of the walk-through and where it runs.
type step struct {
	line    int // of the opening fence, for messages
	machine string
	repeat  bool // a check, re-run until it succeeds
	script  string
}

var runMarker = regexp.MustCompile(`^<!-- run: ([a-z-]+)(, until it succeeds)? -->$`)

// parseSteps returns every ```sh block of md in order. Each must follow a
// run marker naming a known machine: a block the test would not run is an
// error, not a skip.
func parseSteps(md string) ([]step, error) {
	var steps []step
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "```sh") {
			continue
		}
		var m []string
		if i > 0 {
			m = runMarker.FindStringSubmatch(lines[i-1])
		}
		if m == nil {
			return nil, fmt.Errorf("README.md:%d: shell block without a <!-- run: MACHINE --> line right above it", i+1)
		}
		if _, ok := machines[m[1]]; !ok {
			return nil, fmt.Errorf("README.md:%d: unknown machine %q", i, m[1])
		}
		s := step{line: i + 1, machine: m[1], repeat: m[2] != ""}
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			s.script += lines[i] + "\n"
		}
		if i == len(lines) {
			return nil, fmt.Errorf("README.md:%d: unterminated shell block", s.line)
		}
		steps = append(steps, s)
	}
	return steps, nil
}

func TestParseSteps(t *testing.T) {
	t.Parallel()
	md, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	steps, err := parseSteps(string(md))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, s := range steps {
		seen[s.machine] = true
	}
	if len(steps) < 10 || len(seen) != len(machines) {
		t.Fatalf("%d steps on %v: the walk-through should run on every machine", len(steps), seen)
	}
	for _, bad := range []string{
		"```sh\necho hi\n```\n",
		"<!-- run: mainframe -->\n```sh\necho hi\n```\n",
		"<!-- run: host -->\n```sh\necho hi\n",
	} {
		if _, err := parseSteps(bad); err == nil {
			t.Errorf("parseSteps(%q) accepted it", bad)
		}
	}
}

// lab is the walk-through's machines as network namespaces on one bridge.
type lab struct {
	t      *testing.T
	prefix string // unique to this test process
	dir    string // the working directory of every block
	env    []string
	logs   []string // every block's output file, daemons included
	groups []int    // every block's process group, daemons included
	// guard kills the groups if this test binary dies (a signal, its
	// -timeout) before the namespaces' cleanup kills what runs in them.
	guard *waitfor.GroupGuard
}

func (l *lab) ns(machine string) string { return l.prefix + machine }

// ip runs ip(8) and fails the test on error.
func (l *lab) ip(args ...string) {
	l.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// network creates a namespace per machine plus one holding the segment's
// Linux bridge, each machine's eth0 a veth into it. Cleanup kills every
// process left in them (the blocks' background daemons) and deletes them.
func (l *lab) network() {
	l.t.Helper()
	names := []string{"lan"}
	for m := range machines {
		names = append(names, m)
	}
	for _, n := range names {
		l.ip("netns", "add", l.ns(n))
		l.t.Cleanup(func() { l.removeNS(l.ns(n)) })
	}
	lan := l.ns("lan")
	l.ip("-n", lan, "link", "add", "br0", "type", "bridge")
	l.ip("-n", lan, "link", "set", "br0", "up")
	i := 0
	for m, addr := range machines {
		port := fmt.Sprintf("p%d", i)
		i++
		l.ip("-n", lan, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", l.ns(m))
		l.ip("-n", lan, "link", "set", port, "master", "br0", "up")
		l.ip("-n", l.ns(m), "addr", "add", addr+"/24", "dev", "eth0")
		l.ip("-n", l.ns(m), "link", "set", "eth0", "up")
		l.ip("-n", l.ns(m), "link", "set", "lo", "up")
	}
}

// removeNS kills the processes in namespace ns and deletes it.
func (l *lab) removeNS(ns string) {
	out, _ := exec.Command("ip", "netns", "pids", ns).Output()
	for _, f := range strings.Fields(string(out)) {
		var pid int
		if _, err := fmt.Sscan(f, &pid); err == nil {
			if p, err := os.FindProcess(pid); err == nil {
				p.Kill()
				p.Wait() // reaps only our own children; others are reaped by their parent
			}
		}
	}
	if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
		l.t.Errorf("ip netns del %s: %v\n%s", ns, err, out)
	}
}

// run runs one block on its machine once and returns its exit error. Its
// output, and that of any daemon it starts in the background, goes to a
// file: a pipe would keep Wait waiting for the daemons.
func (l *lab) run(s step, attempt int) error {
	// A check's attempts share one file: the last one is what matters.
	log := filepath.Join(l.dir, fmt.Sprintf("step-%03d-%s.log", s.line, s.machine))
	f, err := os.Create(log)
	if err != nil {
		return err
	}
	defer f.Close()
	if attempt == 0 {
		l.logs = append(l.logs, log)
	}
	cmd := exec.Command("ip", "netns", "exec", l.ns(s.machine), "sh", "-e", "-c", s.script)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = l.dir, l.env, f, f
	err = waitfor.CommandGuarded(cmd, waitfor.CommandStall, l.guard)
	if cmd.Process != nil {
		l.groups = append(l.groups, cmd.Process.Pid)
	}
	return err
}

// dump prints every block's output (the daemons' logs among them).
func (l *lab) dump() {
	for _, log := range l.logs {
		b, _ := os.ReadFile(log)
		l.t.Logf("--- %s:\n%s", filepath.Base(log), b)
	}
}

// A block is killed when it stands still (no output, no CPU for
// waitfor.CommandStall); a check is re-run every pollEvery until it
// succeeds, while the daemons it waits on move (their output grows or
// they use CPU).
const pollEvery = 200 * time.Millisecond

// TestWalkthrough runs README.md as an operator would type it: the
// manager, the switch, the GPU box and the host each a network namespace
// with the walk-through's address, every block run as written on its
// machine with nothing substituted but the dxpu on PATH.
func TestWalkthrough(t *testing.T) {
	privtest.NetNS(t)
	privtest.Tool(t, "ip", "curl", "jq", "base64")
	md, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	steps, err := parseSteps(string(md))
	if err != nil {
		t.Fatal(err)
	}
	l := &lab{t: t, prefix: fmt.Sprintf("dxpu%d-", os.Getpid()), dir: t.TempDir()}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "dxpu"), "github.com/dxpu/dxpu/cmd/dxpu")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	l.env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	if err := copyExamples(filepath.Join(l.dir, "examples")); err != nil {
		t.Fatal(err)
	}
	l.network()
	if l.guard, err = waitfor.NewGroupGuard(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			l.dump()
		}
		// Before the namespaces' cleanup, while their daemons still
		// run: the guard lists only groups that held daemons when their
		// block returned.
		l.guard.Close()
	})

	for _, s := range steps {
		if err := l.step(s); err != nil {
			t.Fatalf("README.md:%d (%s): %v\n%s", s.line, s.machine, err, s.script)
		}
	}
}

// step runs s once or, for a check, until it succeeds.
func (l *lab) step(s step) error {
	if !s.repeat {
		return l.run(s, 0)
	}
	groups, logs := slices.Clone(l.groups), slices.Clone(l.logs)
	w := waitfor.NewStall(waitfor.CommandStall)
	start := time.Now()
	for attempt := 0; ; attempt++ {
		err := l.run(s, attempt)
		if err == nil {
			return nil
		}
		p := waitfor.GroupCPU(groups...)
		for _, log := range logs {
			if st, serr := os.Stat(log); serr == nil {
				p += uint64(st.Size())
			}
		}
		if w.Stalled(p) {
			return fmt.Errorf("still failing after %v (%d attempts), the daemons idle and silent for %v: %w",
				time.Since(start).Round(time.Second), attempt+1, waitfor.CommandStall, err)
		}
		t := time.NewTimer(pollEvery)
		<-t.C
	}
}

// copyExamples copies the walk-through's JSON files to dst.
func copyExamples(dst string) error {
	files, err := filepath.Glob("*.json")
	if err != nil || len(files) == 0 {
		return errors.Join(errors.New("no example files in examples/"), err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
