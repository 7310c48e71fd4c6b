package jsonfile

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/fabric/pool"
	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/internal/app/apperr"
)

func TestFields(t *testing.T) {
	t.Parallel()
	got := strings.Join(Fields(reflect.TypeFor[pool.Box]()), " ")
	for _, want := range []string{"id", "bridge.switch_port", "gpus[].memory_mib", "location.pod"} {
		if !strings.Contains(" "+got+" ", " "+want+" ") {
			t.Errorf("%q missing from %s", want, got)
		}
	}
}

// TestReadRefusesUnknownFields: the error names the stranger, the file and
// the fields the type accepts.
func TestReadRefusesUnknownFields(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "box.json")
	os.WriteFile(f, []byte(`{"id":"b","gpus":[{"id":"g","mem_mib":1}]}`), 0o600)
	_, err := Read[pool.Box](nil, f)
	if !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), `unknown field "mem_mib"`) ||
		!strings.Contains(err.Error(), "gpus[].memory_mib") || !strings.Contains(err.Error(), f) {
		t.Fatalf("%v", err)
	}
	b, err := Read[pool.Box](strings.NewReader(`{"id":"b2","bridge":{"switch_port":"p1","mac":"02:00:00:00:00:01"}}`), "-")
	if err != nil || b.ID != "b2" {
		t.Fatalf("stdin: %+v %v", b, err)
	}
}

// TestReadExplains: every way a box file can be wrong gets one line that
// names the file, where (line and column) and what JSON was expected, and
// never a Go type (pool.Box, uint64) or a bare EOF.
func TestReadExplains(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, tc := range map[string]struct{ body, want string }{
		"empty":     {"", "empty.json is empty: expected an object with fields id, bridge, agent_url, location, gpus, draining"},
		"blank":     {" \n\n", "blank.json is empty: expected an object with fields id,"},
		"array":     {"[]", "array.json: line 1 col 1: expected an object with fields id, bridge, agent_url, location, gpus, draining, unreachable, found an array"},
		"id number": {"{\n  \"id\": 17\n}", "id number.json: line 2 col 9: field id: expected a string, found a number"},
		"negative":  {`{"id":"b","gpus":[{"id":"g","memory_mib":-1}]}`, "line 1 col 42: field gpus[].memory_mib: expected a whole number >= 0, found the number -1"},
		"gpus obj":  {`{"gpus":{}}`, "line 1 col 9: field gpus: expected an array of objects with fields id, model, memory_mib"},
		"port":      {`{"bridge":{"udp_port":70000}}`, "field bridge.udp_port: expected a whole number from 0 to 65535, found the number 70000"},
		"syntax":    {"{\"id\": \"b\",\n}", "syntax.json: line 2 col 1: invalid character '}' looking for beginning of object key string"},
		"cut":       {"{\"id\": \"b\",\n  \"gpus\": [", "cut.json: line 2 col 12: the JSON ends before its value is complete"},
		"unknown":   {"{\"id\": \"b\",\n  \"gpu\": []}", `unknown.json: line 2 col 3: unknown field "gpu"; valid fields: id, bridge.switch_port`},
		"trailing":  {`{"id":"b"} {"id":"c"}`, "trailing.json: line 1 col 12: unexpected data after the JSON value"},
		"twice":     {"{\"id\": \"b\",\n \"id\": \"c\"}", `twice.json: line 2 col 2: duplicate field "id"`},
		"case":      {`{"ID": "b"}`, `case.json: line 1 col 2: field "ID": field names are case-sensitive; want "id"`},
		"{}":        {"{}", "{}.json: invalid argument: missing required fields id, bridge.switch_port, bridge.mac"},
	} {
		f := filepath.Join(dir, name+".json")
		os.WriteFile(f, []byte(tc.body), 0o600)
		_, err := Read[pool.Box](nil, f)
		if !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant %q", name, err, tc.want)
			continue
		}
		for _, goish := range []string{"pool.", "Go ", "uint", "int ", "main.", "EOF", "\n"} {
			if strings.Contains(err.Error(), goish) {
				t.Errorf("%s: %q in %v", name, goish, err)
			}
		}
	}
	if _, err := Read[pool.Host](strings.NewReader(`{"id":"h"}`), "-"); err == nil ||
		!strings.Contains(err.Error(), "stdin: invalid argument: missing required fields bridge.switch_port, bridge.mac, ports") {
		t.Errorf("host on stdin: %v", err)
	}
}

// TestExplainFile: a switch table file (decoded by fabric/switching, which
// cannot import this package) gets the same explanations.
func TestExplainFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for body, want := range map[string]string{
		"":                  " is empty: expected an object with fields version, pairs",
		"[]":                ": line 1 col 1: expected an object with fields version, pairs, found an array",
		"{\n\"pairs\": {}}": ": line 2 col 10: field pairs: expected an array of objects with fields id, host, gpu",
		`{"version":1,}`:    ": line 1 col 14: invalid character '}'",
	} {
		f := filepath.Join(dir, "table.json")
		os.WriteFile(f, []byte(body), 0o600)
		_, err := switching.LoadTable(f)
		got := ExplainFile(err, f, switching.TableFileForm)
		if got == nil || !strings.Contains(got.Error(), f+want) || strings.Contains(got.Error(), "Go ") {
			t.Errorf("%q: %v\nwant %q", body, got, want)
		}
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		if !errors.As(got, &se) && !errors.As(got, &te) {
			t.Errorf("%q: the cause left the chain: %#v", body, got)
		}
	}
	other := errors.New("switch: table pairs[0].host.mac: bad")
	if ExplainFile(other, "x", "") != other {
		t.Error("a non-JSON error was rewritten")
	}
}
