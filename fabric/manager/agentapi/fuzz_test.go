package agentapi_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/fabric/manager/agentapi"
	"github.com/dxpu/dxpu/internal/fakeagent"
)

// FuzzHandler sends arbitrary paths and bodies to an agent. Invariants: the
// answer is 204 (and then the pair named in the path was acted on), 400,
// 401, 404 or 405 (and then the agent's state is unchanged); never 5xx.
func FuzzHandler(f *testing.F) {
	f.Add("PUT", "5", `{"id":5,"allocation":"a"}`, true)
	f.Add("DELETE", "5", `{"id":5}`, true)
	f.Add("POST", "5/hot-add", `{"id":5}`, true)
	f.Add("PUT", "0", `{"id":0}`, true)
	f.Add("PUT", "5", `{"id":5,"host_port":"x"}`, false)
	agent := fakeagent.New("fuzz")
	// Call the handler directly: through a server, Go's own request parser
	// answers 400 to malformed request lines before any handler runs, which
	// says nothing about the agent API.
	h := agentapi.Handler(agent, "tok")
	f.Fuzz(func(t *testing.T, method, path, body string, auth bool) {
		if method != "PUT" && method != "DELETE" && method != "POST" && method != "GET" {
			return
		}
		req, err := http.NewRequest(method, "http://agent/agent/v1/pairs/"+path, strings.NewReader(body))
		if err != nil {
			return // not a URL
		}
		if auth {
			req.Header.Set("Authorization", "Bearer tok")
		}
		before, hotBefore := agent.Pairs(), agent.HotAdded()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		resp := rec.Result()
		switch resp.StatusCode {
		case 301, 307, 308:
			// The mux redirects unclean paths ("./", "//") to their clean
			// form before any handler runs: nothing was acted on.
			if !slices.Equal(agent.Pairs(), before) {
				t.Fatalf("redirect changed pairs")
			}
			return
		case 204, 200:
		case 400, 401, 404, 405:
			if !slices.Equal(agent.Pairs(), before) || !slices.Equal(agent.HotAdded(), hotBefore) {
				t.Fatalf("%s %s %q refused with %d but changed the agent", method, path, body, resp.StatusCode)
			}
		case 502:
			// the fake refused (hot-add of an unprogrammed pair, or a
			// pair owned by another allocation): fine, and no change
			if !slices.Equal(agent.Pairs(), before) {
				t.Fatalf("failed call changed pairs")
			}
		default:
			t.Fatalf("%s %s %q: status %d", method, path, body, resp.StatusCode)
		}
		if !auth && resp.StatusCode != 401 {
			t.Fatalf("unauthenticated call answered %d", resp.StatusCode)
		}
	})
}
