package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/internal/privtest"
)

// unitsDir holds the systemd units of the daemons.
const unitsDir = "../../contrib/systemd"

// unitDirectives reads a unit file's [Service] directives: key to values,
// in order (a key may repeat).
func unitDirectives(t *testing.T, path string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := map[string][]string{}
	section := ""
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, _ := strings.Cut(line, "=")
			d[k] = append(d[k], v)
		}
	}
	return d
}

// TestSystemdUnits: each daemon has a unit; each unit's ExecStart runs a
// dxpu command with flags that command has (a renamed flag fails here,
// not at a deployment's first start); each is hardened (strict
// read-only system, no new privileges, a dynamic user, a capability
// bounding set) with capabilities only where needed: none for the manager
// and the agents (UDP), the XDP ones for the switch; the manager keeps
// its store in a state directory.
func TestSystemdUnits(t *testing.T) {
	t.Parallel()
	root := newRootCmd(newEnv(strings.NewReader(""), &strings.Builder{}, &strings.Builder{}, nil, noEnv))
	want := map[string][]string{
		"dxpu-manager.service":    nil,
		"dxpu-switch.service":     {"CAP_BPF", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_PERFMON"},
		"dxpu-agent-gpu.service":  nil,
		"dxpu-agent-host.service": nil,
	}
	for name, caps := range want {
		d := unitDirectives(t, filepath.Join(unitsDir, name))
		for k, v := range map[string]string{"ProtectSystem": "strict", "NoNewPrivileges": "yes", "DynamicUser": "yes", "ProtectHome": "yes", "PrivateTmp": "yes"} {
			if got := d[k]; len(got) != 1 || got[0] != v {
				t.Errorf("%s: %s=%v, want %s", name, k, got, v)
			}
		}
		for _, k := range []string{"CapabilityBoundingSet", "AmbientCapabilities"} {
			got := strings.Fields(strings.Join(d[k], " "))
			slices.Sort(got)
			if len(d[k]) != 1 || !slices.Equal(got, caps) {
				t.Errorf("%s: %s=%v, want exactly %v", name, k, d[k], caps)
			}
		}
		if name == "dxpu-manager.service" && (len(d["StateDirectory"]) != 1 || !strings.Contains(d["ExecStart"][0], "--store ${STATE_DIRECTORY}/")) {
			t.Errorf("%s: the store is not in the state directory: StateDirectory %v, ExecStart %v", name, d["StateDirectory"], d["ExecStart"])
		}
		if len(d["ExecStart"]) != 1 {
			t.Errorf("%s: ExecStart %v", name, d["ExecStart"])
			continue
		}
		args := strings.Fields(d["ExecStart"][0])
		if args[0] != "/usr/local/bin/dxpu" {
			t.Errorf("%s runs %s", name, args[0])
		}
		var path []string
		for _, a := range args[1:] {
			if strings.HasPrefix(a, "-") || strings.HasPrefix(a, "$") {
				break
			}
			path = append(path, a)
		}
		cmd, rest, err := root.Find(path)
		if err != nil || len(rest) != 0 || cmd == root {
			t.Errorf("%s: dxpu %v is no command (%v)", name, path, err)
			continue
		}
		for _, a := range args[1+len(path):] {
			if flag, ok := strings.CutPrefix(a, "--"); ok && cmd.Flags().Lookup(flag) == nil {
				t.Errorf("%s: %s has no flag --%s", name, cmd.CommandPath(), flag)
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join(unitsDir, "*.service"))
	if len(files) != len(want) {
		t.Errorf("units %v, want the %d above", files, len(want))
	}
}

// TestSystemdAnalyzeVerify: systemd itself accepts the units, without a
// warning (an unknown or misspelt directive only warns).
func TestSystemdAnalyzeVerify(t *testing.T) {
	t.Parallel()
	analyze := privtest.Tool(t, "systemd-analyze")
	files, err := filepath.Glob(filepath.Join(unitsDir, "*.service"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no units: %v", err)
	}
	// verify wants ExecStart's program to exist: this test's binary
	// stands in for /usr/local/bin/dxpu.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var copies []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c := filepath.Join(dir, filepath.Base(f))
		if err := os.WriteFile(c, bytes.ReplaceAll(b, []byte("/usr/local/bin/dxpu"), []byte(self)), 0o644); err != nil {
			t.Fatal(err)
		}
		copies = append(copies, c)
	}
	out, err := exec.Command(analyze, append([]string{"verify", "--man=no"}, copies...)...).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
