package wireshark

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/internal/privtest"
)

// dissectorPath is the dissector under test, next to this file.
const dissectorPath = "dxpu.lua"

// tsharkPath returns tshark's path, skipping (or failing, with
// DXPU_REQUIRE_PRIVILEGED=1) when it is not installed, and fails when it
// cannot run Lua dissectors.
func tsharkPath(t *testing.T) string {
	t.Helper()
	p := privtest.Tool(t, "tshark")
	if p == "" {
		return ""
	}
	out, err := exec.CommandContext(t.Context(), p, "-v").CombinedOutput()
	if err != nil {
		t.Fatalf("%s -v: %v\n%s", p, err, out)
	}
	if !bytes.Contains(out, []byte("with Lua")) {
		t.Fatalf("%s is built without Lua: it cannot load %s", p, dissectorPath)
	}
	return p
}

// dissect runs tshark with the dissector over capture and returns each
// frame's protocol layers, in frame order. A personal configuration (an
// installed copy of the dissector, preferences) cannot interfere: HOME
// points at an empty directory.
func dissect(t *testing.T, tshark, capture string) []map[string]any {
	t.Helper()
	script, err := filepath.Abs(dissectorPath)
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	cmd := exec.CommandContext(t.Context(), tshark, "-n", "-X", "lua_script:"+script, "-r", capture,
		"-T", "json", "--no-duplicate-keys")
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("tshark on %s: %v\n%s", capture, err, stderr.Bytes())
	}
	// tshark reports a dissector that does not load on stderr and goes on
	// without it.
	if s := stderr.String(); strings.Contains(s, "Lua") || strings.Contains(s, "lua") {
		t.Fatalf("tshark on %s reports a Lua problem:\n%s", capture, s)
	}
	var pkts []struct {
		Source struct {
			Layers map[string]any `json:"layers"`
		} `json:"_source"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &pkts); err != nil {
		t.Fatalf("tshark on %s: reading its JSON: %v", capture, err)
	}
	out := make([]map[string]any, len(pkts))
	for i, p := range pkts {
		out[i] = p.Source.Layers
	}
	return out
}

// asList returns the values of a key that --no-duplicate-keys merged into
// an array, or the single value as a list of one; nil when absent.
func asList(v any) []any {
	switch v := v.(type) {
	case nil:
		return nil
	case []any:
		return v
	}
	return []any{v}
}

// flatten returns the fields of a tshark subtree as key -> value (a string,
// or a []any for repeated fields), descending into the children of items
// (keys ending in "_tree"). Expert infos and the subtrees that stop names
// are left out.
func flatten(obj map[string]any, stop func(key string) bool) map[string]any {
	out := map[string]any{}
	var walk func(map[string]any)
	walk = func(o map[string]any) {
		for k, v := range o {
			switch {
			case k == "_ws.expert" || stop(k):
			case strings.HasSuffix(k, "_tree"):
				for _, c := range asList(v) {
					if m, ok := c.(map[string]any); ok {
						walk(m)
					}
				}
			default:
				out[k] = v
			}
		}
	}
	walk(obj)
	return out
}

// experts returns the dxpu expert infos in a subtree, sorted, not looking
// inside the subtrees that stop names.
func experts(obj map[string]any, stop func(key string) bool) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case []any:
			for _, c := range v {
				walk(c)
			}
		case map[string]any:
			for k, c := range v {
				switch {
				case stop(k):
				case k == "_ws.expert":
					for _, e := range asList(c) {
						m, _ := e.(map[string]any)
						for ek := range m {
							if strings.HasPrefix(ek, "dxpu.expert.") {
								out = append(out, ek)
							}
						}
						walk(e)
					}
				default:
					walk(c)
				}
			}
		}
	}
	walk(obj)
	sort.Strings(out)
	return out
}

// hasKey reports whether key appears anywhere in v.
func hasKey(v any, key string) bool {
	switch v := v.(type) {
	case []any:
		for _, c := range v {
			if hasKey(c, key) {
				return true
			}
		}
	case map[string]any:
		for k, c := range v {
			if k == key || hasKey(c, key) {
				return true
			}
		}
	}
	return false
}

// TestInstalledAndGivenTogether: with a copy installed in the personal
// plugins folder and the same file given with -X lua_script: (the two
// ways the README shows), tshark loads without a Lua error ("there cannot
// be two protocols with the same description") and dissects dxpu.
func TestInstalledAndGivenTogether(t *testing.T) {
	t.Parallel()
	tshark := tsharkPath(t)
	script, err := filepath.Abs(dissectorPath)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	plugins := filepath.Join(home, ".local", "lib", "wireshark", "plugins")
	if err := os.MkdirAll(plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plugins, "dxpu.lua"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	capture := filepath.Join("..", "..", "testdata", "pcap", "mix.pcap")
	for _, args := range [][]string{
		{"-n", "-X", "lua_script:" + script, "-r", capture, "-Y", "dxpu", "-c", "5"},
		{"-n", "-r", capture, "-Y", "dxpu", "-c", "5"},
	} {
		cmd := exec.CommandContext(t.Context(), tshark, args...)
		cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("tshark %v: %v\n%s", args, err, stderr.Bytes())
		}
		if s := stderr.String(); strings.Contains(s, "Lua") || strings.Contains(s, "lua") {
			t.Fatalf("tshark %v reports a Lua problem:\n%s", args, s)
		}
		if !strings.Contains(stdout.String(), "dxpu 72 TLP pair 4370298 seq 3226874660: CfgRd1") {
			t.Fatalf("tshark %v does not dissect mix.pcap's second frame as dxpu:\n%s", args, stdout.Bytes())
		}
	}
}
