package manager_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// apiErr parses an error answer; it fails the test unless it is the
// one-line envelope.
func apiErr(t *testing.T, body string) (code, msg string) {
	t.Helper()
	var env struct {
		Error *struct{ Code, Message string }
	}
	if err := json.Unmarshal([]byte(body), &env); err != nil || env.Error == nil {
		t.Fatalf("not an error envelope: %.300s", body)
	}
	if strings.Contains(env.Error.Message, "\n") {
		t.Fatalf("error message of more than one line: %q", env.Error.Message)
	}
	return env.Error.Code, env.Error.Message
}

// TestDecodeIsStrict repeats finding F9's bodies: data after the object,
// duplicate keys, keys spelled in another case, and (F8) the fields the
// manager fills in on its answers, at the top or nested, are refused, 400
// with one line naming what is wrong; nothing is created.
func TestDecodeIsStrict(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	seed(t, e.c, 1, 2, 1)
	alloc := `{"host":"host0","count":1}`
	box := `{"id":"bx","bridge":{"switch_port":"p","mac":"02:00:00:00:00:aa"},"gpus":[{"id":"bx-0","model":"A"%s}]%s}`
	for _, tc := range []struct {
		name, method, path, body, want string
	}{
		{"brackets after the object", "POST", "/v1/allocations", alloc + "]]]]", "trailing data"},
		{"braces after the object", "POST", "/v1/allocations", alloc + "}}}}", "trailing data"},
		{"a second object", "POST", "/v1/allocations", alloc + ` {"host":"host0","count":1}`, "trailing data"},
		{"duplicate key", "POST", "/v1/allocations", `{"host":"nonexistent","host":"host0","count":1}`, `duplicate field "host"`},
		{"duplicate nested key", "POST", "/v1/boxes", fmt.Sprintf(box, `,"model":"B"`, ""), `duplicate field "gpus[0].model"`},
		{"key in upper case", "POST", "/v1/allocations", `{"HOST":"host0","count":1}`, `field "HOST": field names are case-sensitive; want "host"`},
		{"nested key in another case", "POST", "/v1/boxes", fmt.Sprintf(box, `,"Memory_MiB":1`, ""), `want "gpus[0].memory_mib"`},
		{"null body", "POST", "/v1/allocations", `null`, "not a JSON object"},
		{"gpu allocation", "POST", "/v1/boxes", fmt.Sprintf(box, `,"allocation":"a-1"`, ""), "field gpus[0].allocation"},
		{"gpu unreachable", "POST", "/v1/boxes", fmt.Sprintf(box, `,"unreachable":{"reason":"x"}`, ""), "field gpus[0].unreachable"},
		{"box unreachable", "POST", "/v1/boxes", fmt.Sprintf(box, "", `,"unreachable":{}`), "field unreachable"},
		{"host used ports", "POST", "/v1/hosts", `{"id":"hx","bridge":{"switch_port":"q","mac":"02:00:00:00:00:bb"},"ports":32,"used_ports":3}`, "field used_ports"},
		{"rtt duplicate", "PUT", "/v1/rtt", `{"host":"host0","box":"box0","rtt":"2us","rtt":"1s"}`, `duplicate field "rtt"`},
		{"health in another case", "POST", "/v1/gpus/box0-gpu0/health", `{"Health":"unhealthy"}`, `want "health"`},
	} {
		status, body := call(t, e.srv, tc.method, tc.path, token, tc.body)
		if status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", tc.name, status, body)
			continue
		}
		if code, msg := apiErr(t, body); code != "bad_request" || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %s %q, want bad_request naming %q", tc.name, code, msg, tc.want)
		}
	}
	if as, err := e.c.Allocations(e.ctx, ""); err != nil || len(as) != 0 {
		t.Fatalf("allocations after the refused bodies: %v %v, want none", as, err)
	}
	if gs, err := e.c.GPUs(e.ctx, "", "unhealthy"); err != nil || len(gs) != 0 {
		t.Fatalf("unhealthy gpus after the refused health: %+v %v, want none", gs, err)
	}
	if rs, err := e.c.RTTs(e.ctx); err != nil || len(rs) != 0 {
		t.Fatalf("rtts after the refused one: %+v %v, want none", rs, err)
	}
	// The strict decoder still takes what clients send: white space after
	// the object, every field in its own spelling, an empty allocation
	// (omitted by encoders, or "" as a GET of a free GPU shows it).
	for _, ok := range []struct{ path, body string }{
		{"/v1/allocations", alloc + " \r\n\t "},
		{"/v1/boxes", fmt.Sprintf(box, `,"allocation":"","box":"bx","memory_mib":1,"bdf":"0000:18:00.0","pcie_switch":0,"pcie_port":0,"health":"healthy"`, `,"location":{"pod":"p","rack":"r"}`)},
	} {
		if status, body := call(t, e.srv, "POST", ok.path, token, ok.body); status/100 != 2 {
			t.Errorf("POST %s %s: %d %s, want it served", ok.path, ok.body, status, body)
		}
	}
}

// TestOversizedBodyIs413: a body over the bound is 413, one line.
func TestOversizedBodyIs413(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	body := `{"host":"` + strings.Repeat("h", 2<<20) + `","count":1}`
	status, resp := call(t, e.srv, "POST", "/v1/allocations", token, body)
	if status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a 2 MiB body: %d %.200s, want 413", status, resp)
	}
	if _, msg := apiErr(t, resp); !strings.Contains(msg, "larger than") {
		t.Fatalf("a 2 MiB body: %q, want it to name the bound", msg)
	}
}

// TestErrorsEchoLittleOfTheRequest: a 60 KB path or ID is not repeated
// whole in the error (404 for an unknown route, 404 for an unknown box).
func TestErrorsEchoLittleOfTheRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	long := strings.Repeat("x", 60<<10)
	for _, path := range []string{"/no/such/route/" + long, "/v1/boxes/" + long} {
		status, body := call(t, e.srv, "GET", path, token, "")
		if status != http.StatusNotFound {
			t.Errorf("GET %.40s...: %d, want 404", path, status)
			continue
		}
		_, msg := apiErr(t, body)
		if len(body) > 1024 || !strings.Contains(msg, "... (") || !strings.Contains(msg, " bytes)") {
			t.Errorf("GET %.40s...: %d-byte answer %.300s, want what it repeats cut short, with its length", path, len(body), body)
		}
	}
}
