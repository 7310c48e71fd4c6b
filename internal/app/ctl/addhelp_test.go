package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/app/jsonfile"
)

// helpFields are the fields `ctl KIND add --help` lists.
func helpFields(t *testing.T, help string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(help, "The fields:\n\n")
	list, _, ok2 := strings.Cut(rest, "\n\n")
	if !ok || !ok2 {
		t.Fatalf("no field list in the help:\n%s", help)
	}
	return strings.Fields(list)
}

// setPath sets the dotted JSON path (gpus[].id: the list's one element)
// in doc to v.
func setPath(doc map[string]any, path string, v any) {
	name, rest, nested := strings.Cut(path, ".")
	if !nested {
		doc[name] = v
		return
	}
	if list, ok := strings.CutSuffix(name, "[]"); ok {
		if doc[list] == nil {
			doc[list] = []any{map[string]any{}}
		}
		setPath(doc[list].([]any)[0].(map[string]any), rest, v)
		return
	}
	if doc[name] == nil {
		doc[name] = map[string]any{}
	}
	setPath(doc[name].(map[string]any), rest, v)
}

// getPath is setPath's reading.
func getPath(doc map[string]any, path string) any {
	name, rest, nested := strings.Cut(path, ".")
	if !nested {
		return doc[name]
	}
	if list, ok := strings.CutSuffix(name, "[]"); ok {
		l, _ := doc[list].([]any)
		if len(l) == 0 {
			return nil
		}
		m, _ := l[0].(map[string]any)
		return getPath(m, rest)
	}
	m, _ := doc[name].(map[string]any)
	return getPath(m, rest)
}

// TestAddHelpFieldsAccepted: every field `ctl box add --help` and `ctl
// host add --help` list is one a registration may set: a file holding all
// of them registers with the manager, and its answer keeps each as sent.
// The fields the help leaves out are the manager's own: a file setting
// any one of them is refused, as a usage error (the help listed
// gpus[].allocation, which the manager refuses).
func TestAddHelpFieldsAccepted(t *testing.T) {
	t.Parallel()
	o, dir := testManager(t, manager.Config{AllowInsecureAgents: true})
	o.JSON = true
	// A value for each field a file may set, and for each the manager sets.
	samples := map[string]any{
		"bridge.switch_port": "eth9", "bridge.ip": "10.77.0.90", "bridge.udp_port": 8855,
		"location.pod": "pod9", "location.rack": "r9",
		"gpus[].id": "box9-gpu0", "gpus[].model": "H100", "gpus[].memory_mib": 81920, "gpus[].bdf": "0000:03:00.0",
		"gpus[].pcie_switch": 1, "gpus[].pcie_port": 2, "gpus[].health": "unhealthy", "draining": true, "ports": 32,
		"gpus[].box": "another-box", "gpus[].allocation": "a-1", "gpus[].unreachable": map[string]any{"reason": "x"},
		"unreachable": map[string]any{"reason": "x"}, "used_ports": 3,
	}
	for _, kind := range []struct {
		name string
		t    reflect.Type
		id   string
		add  func(context.Context, Options, string) error
	}{
		{"box", reflect.TypeFor[pool.Box](), "box9", AddBox},
		{"host", reflect.TypeFor[pool.Host](), "host9", AddHost},
	} {
		mac := map[string]string{"box": "02:00:00:00:09:01", "host": "02:00:00:00:09:02"}[kind.name]
		base := func() map[string]any {
			doc := map[string]any{}
			for _, f := range helpFields(t, AddHelp(kind.name, kind.t, "")) {
				v, ok := samples[f]
				switch f {
				case "id":
					v, ok = kind.id, true
				case "bridge.mac":
					v, ok = mac, true
				case "agent_url":
					v, ok = "http://127.0.0.1:7"+map[string]string{"box": "1", "host": "2"}[kind.name], true
				}
				if !ok {
					t.Fatalf("ctl %s add --help lists %s, for which the test has no value: add one", kind.name, f)
				}
				setPath(doc, f, v)
			}
			if kind.name == "host" {
				doc["bridge"].(map[string]any)["switch_port"] = "eth8"
				doc["bridge"].(map[string]any)["ip"] = "10.77.0.91"
			}
			return doc
		}
		register := func(doc map[string]any) (string, error) {
			b, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			f := filepath.Join(dir, kind.name+".json")
			if err := os.WriteFile(f, b, 0o600); err != nil {
				t.Fatal(err)
			}
			return do(t, o, func(ctx context.Context, o Options) error { return kind.add(ctx, o, f) })
		}
		// The manager's fields first: the box is still new, so none of
		// them can pass for a change of a known registration.
		all := jsonfile.Fields(kind.t)
		listed := helpFields(t, AddHelp(kind.name, kind.t, ""))
		for _, f := range all {
			if slices.Contains(listed, f) {
				continue
			}
			doc := base()
			setPath(doc, f, samples[f])
			if _, err := register(doc); !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), strings.ReplaceAll(f, "[]", "[0]")) {
				t.Errorf("ctl %s add --help leaves out %s, but a file setting it: %v; want a usage error naming it", kind.name, f, err)
			}
		}
		out, err := register(base())
		if err != nil {
			t.Fatalf("ctl %s add with every field its help lists: %v", kind.name, err)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		want := base()
		for _, f := range listed {
			if w, g := getPath(want, f), getPath(got, f); !reflect.DeepEqual(jsonValue(t, w), g) {
				t.Errorf("ctl %s add: %s sent as %v, the manager's answer has %v", kind.name, f, w, g)
			}
		}
	}
}

// jsonValue is v as JSON decodes it into an any.
func jsonValue(t *testing.T, v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
