package main

import (
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/fabric/manager"
	switching "github.com/dxpu/dxpu/fabric/switching"
)

// examplesDir is examples/ at the repository root.
const examplesDir = "../../examples"

// TestExampleFiles: examples/box.json and host.json register with a real
// manager through ctl (its decoder refuses unknown fields, the manager
// validates), and examples/table.json loads as the switch loads its
// --table file; so do the examples in ctl's help. (Lending from the
// example pool needs its agents: examples/walkthrough_test.go runs them.)
func TestExampleFiles(t *testing.T) {
	t.Parallel()
	// The walk-through's lab reaches its agents over http.
	m, err := manager.New(manager.Config{Token: "tok", AllowInsecureAgents: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	os.WriteFile(tok, []byte("tok\n"), 0o600)
	base := []string{"--manager", srv.URL, "--token-file", tok}
	helpBox, helpHost := filepath.Join(dir, "box.json"), filepath.Join(dir, "host.json")
	os.WriteFile(helpBox, []byte(boxExample), 0o600)
	os.WriteFile(helpHost, []byte(hostExample), 0o600)
	// The help's examples go to a second manager: they describe the same
	// bridges as the files, and one manager refuses clashing endpoints.
	m2, err := manager.New(manager.Config{Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	srv2 := httptest.NewServer(m2.Handler())
	defer srv2.Close()
	base2 := []string{"--manager", srv2.URL, "--token-file", tok}
	for _, args := range [][]string{
		append(base, "box", "add", filepath.Join(examplesDir, "box.json")),
		append(base, "host", "add", filepath.Join(examplesDir, "host.json")),
		append(base2, "box", "add", helpBox),
		append(base2, "host", "add", helpHost),
	} {
		if _, err := runCtl(t, args...); err != nil {
			t.Errorf("ctl %v: %v", args, err)
		}
	}
	tab, err := switching.LoadTable(filepath.Join(examplesDir, "table.json"))
	if err != nil || len(tab.Pairs) != 1 {
		t.Fatalf("examples/table.json: %v", err)
	}
}

// TestUnknownFieldListsValidOnes: a misspelt field is refused with the
// names the file may use.
func TestUnknownFieldListsValidOnes(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "box.json")
	os.WriteFile(f, []byte(`{"id":"b","gpus":[{"id":"g","mem_mib":1}]}`), 0o600)
	_, err := runCtl(t, "box", "add", f)
	var ec exitCodeError
	if !errors.As(err, &ec) || ec.code != 2 || !strings.Contains(err.Error(), `unknown field "mem_mib"`) ||
		!strings.Contains(err.Error(), "gpus[].memory_mib") || !strings.Contains(err.Error(), "bridge.switch_port") {
		t.Fatalf("%v", err)
	}
}

// TestAddHelpShowsFields: ctl box add --help and ctl host add --help list
// the JSON fields and an example.
func TestAddHelpShowsFields(t *testing.T) {
	t.Parallel()
	for kind, want := range map[string][]string{
		"box":  {"gpus[].memory_mib", "bridge.udp_port", `"pcie_switch": 0`},
		"host": {"ports", "bridge.mac", `"ports": 32`},
	} {
		out, err := runCtl(t, kind, "add", "--help")
		for _, w := range want {
			if err != nil || !strings.Contains(out, w) {
				t.Errorf("ctl %s add --help lacks %q (%v)", kind, w, err)
			}
		}
	}
}
