package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/dxpu/dxpu/"

// layer names the room a package lives in; "" for the module's rigs and
// helpers under internal/ that are not products.
func layer(path string) string {
	p := strings.TrimPrefix(path, module)
	for _, l := range []struct{ prefix, name string }{
		{"cmd/", "cmd"}, {"internal/app/", "app"}, {"fabric/", "fabric"}, {"xdp", "fabric"},
		{"emu/", "emu"}, {"model", "model"}, {"bridge", "bridge"}, {"tlp", "tlp"}, {"sim", "sim"},
	} {
		if p == strings.TrimSuffix(l.prefix, "/") || strings.HasPrefix(p, l.prefix) {
			return l.name
		}
	}
	return ""
}

// groundHelpers are internal helpers at the ground, as sim is, that every
// layer may import: the shared-data locator (tests) and the strict JSON
// check that the API, the command line, tlp and model judge input by.
var groundHelpers = []string{"internal/shareddata", "internal/strictjson"}

// allowed lists, for each layer, the layers its production code may import.
var allowed = map[string][]string{
	"sim":    {"sim"},
	"tlp":    {"tlp"},
	"bridge": {"bridge", "tlp", "sim"},
	"fabric": {"fabric", "bridge", "tlp", "sim"},
	"emu":    {"emu", "model", "bridge", "tlp", "sim"},
	"model":  {"model", "sim"},
	"app":    {"app", "fabric", "emu", "model", "bridge", "tlp", "sim"},
	"cmd":    {"app", "fabric", "emu", "model", "bridge", "tlp", "sim"},
}

// testOnly are packages no shipped code may import.
var testOnly = []string{"testing", "net/http/httptest", module + "internal/switchtest", module + "internal/fakeagent",
	module + "internal/etcdtest", module + "internal/xdptest", module + "internal/privtest", module + "internal/testcert",
	module + "internal/testbin", module + "internal/frametest", module + "internal/syncbuf"}

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func list(t *testing.T, args ...string) []pkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestImportsFlowOneWay: no package imports a layer above its own.
func TestImportsFlowOneWay(t *testing.T) {
	t.Parallel()
	for _, p := range list(t, "./...") {
		from := layer(p.ImportPath)
		if from == "" {
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			to := layer(imp)
			if to == "" {
				// An internal helper: only app and cmd may depend on them,
				// apart from the ground helpers every layer may use.
				if from != "app" && from != "cmd" && !slices.Contains(groundHelpers, strings.TrimPrefix(imp, module)) {
					t.Errorf("%s (layer %s) imports internal helper %s", p.ImportPath, from, imp)
				}
				continue
			}
			ok := false
			for _, a := range allowed[from] {
				ok = ok || a == to
			}
			if !ok {
				t.Errorf("%s (layer %s) imports %s (layer %s): imports flow tlp <- bridge <- fabric/emu/model <- app <- cmd", p.ImportPath, from, imp, to)
			}
		}
	}
}

// TestShippedCodeHasNoTestRigs: what the binary links holds no testing
// package, httptest or test-only rig.
func TestShippedCodeHasNoTestRigs(t *testing.T) {
	t.Parallel()
	for _, p := range list(t, "-deps", "./cmd/dxpu") {
		for _, bad := range testOnly {
			if p.ImportPath == bad {
				t.Errorf("the dxpu binary links %s", bad)
			}
		}
	}
}
