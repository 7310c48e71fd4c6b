package manager_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// FuzzAPI sends arbitrary bodies to every mutating route, with and without
// the token. Invariants: no 5xx, every error is the JSON envelope with a
// code and a message, a call without the token changes nothing, and the
// pool stays consistent.
func FuzzAPI(f *testing.F) {
	routes := []struct{ method, path string }{
		{"POST", "/v1/allocations"}, {"POST", "/v1/boxes"}, {"POST", "/v1/hosts"}, {"PUT", "/v1/rtt"},
		{"POST", "/v1/gpus/box0-gpu1/health"}, {"DELETE", "/v1/hosts/host1"}, {"POST", "/v1/boxes/box1/drain"},
	}
	f.Add(uint8(0), true, `{"host":"host0","count":2}`)
	f.Add(uint8(0), true, `{"host":"host0","count":2,"same_box":true,"max_rtt":"3us"}`)
	f.Add(uint8(1), true, `{"id":"bx","bridge":{"switch_port":"p","mac":"02:00:00:00:00:aa"},"gpus":[{"id":"bx-0","model":"A"}]}`)
	f.Add(uint8(2), false, `{"id":"hx","bridge":{"switch_port":"p","mac":"02:00:00:00:00:bb"},"ports":32}`)
	f.Add(uint8(3), true, `{"host":"host0","box":"box1","rtt":"2us"}`)
	f.Add(uint8(4), true, `{"health":"unhealthy"}`)
	f.Add(uint8(0), true, `{"host":"host0","count":1e9}`)
	f.Add(uint8(1), true, `[]`)
	e := newEnv(f, nil)
	seed(f, e.c, 2, 4, 2)
	f.Fuzz(func(t *testing.T, route uint8, auth bool, body string) {
		r := routes[int(route)%len(routes)]
		before := storeDump(t, e.st)
		req, _ := http.NewRequest(r.method, e.srv.URL+r.path, strings.NewReader(body))
		if auth {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Fatalf("%s %s %q: %d %s", r.method, r.path, body, resp.StatusCode, b)
		}
		if resp.StatusCode >= 400 {
			var env struct {
				Error *struct{ Code, Message string }
			}
			if json.Unmarshal(b, &env) != nil || env.Error == nil || env.Error.Code == "" || env.Error.Message == "" {
				t.Fatalf("error body is not the envelope: %s", b)
			}
		}
		if !auth && (resp.StatusCode != 401 || storeDump(t, e.st) != before) {
			t.Fatalf("call without token: status %d, store changed: %v", resp.StatusCode, storeDump(t, e.st) != before)
		}
		if err := e.m.Pool().CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	})
}
