package manager_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/fakeagent"
)

// FuzzAgentReport sends arbitrary link reports to the manager's agent
// routes: any pair ID in the path, any body, the box agent's, the host
// agent's, another agent's or no credential. Invariants: the answer is 200
// or a refusal (400, 401, 403, 404) in the error envelope with a one-line
// message, never a 5xx; the pool stays consistent, and the allocation
// reads back without a 5xx.
func FuzzAgentReport(f *testing.F) {
	m, err := manager.New(manager.Config{GPUBridge: fakeagent.New("gpu"), HostBridge: fakeagent.New("host"),
		Token: token, Logger: quiet(), ReconcileInterval: -1, DegradedAfter: time.Hour})
	if err != nil {
		f.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler())
	defer func() { srv.Close(); m.Close() }()
	ctx := context.Background()
	c := ctlclient.New(srv.URL, token)
	creds := []string{"", "not-a-credential"}
	for i := range 2 {
		b := testBox(i, 2)
		b.AgentURL = fmt.Sprintf("https://10.1.0.%d:7701", i+1)
		_, cred, err := c.RegisterBoxAgent(ctx, b)
		if err != nil {
			f.Fatal(err)
		}
		creds = append(creds, cred)
	}
	h := testHost(0)
	h.AgentURL = "https://10.2.0.1:7701"
	_, hostCred, err := c.RegisterHostAgent(ctx, h)
	if err != nil {
		f.Fatal(err)
	}
	creds = append(creds, hostCred)
	a, err := c.Allocate(ctx, pool.Request{Host: "host0", Count: 2, SameBox: true})
	if err != nil {
		f.Fatal(err)
	}
	pair := fmt.Sprint(a.GPUs[0].Pair)
	for i := range creds {
		f.Add(true, pair, uint8(i), `{"reason":"peer silent for 1s"}`)
		f.Add(false, pair, uint8(i), `{}`)
	}
	f.Add(true, "0", uint8(2), `{"reason":""}`)
	f.Add(true, "16777216", uint8(4), `{"reason":"x"}`)
	f.Add(true, pair, uint8(2), `{"reason":"a\nb","extra":1}`)
	f.Add(true, pair, uint8(2), `{"reason":`)
	f.Fuzz(func(t *testing.T, down bool, id string, who uint8, body string) {
		what := "link-up"
		if down {
			what = "link-down"
		}
		// The id is one path segment, escaped: a raw '?' and spaces made a
		// request line net/http's server refuses itself (400, text/plain)
		// before any handler of ours sees it.
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/agent/pairs/"+url.PathEscape(id)+"/"+what, strings.NewReader(body))
		if err != nil {
			return // not a URL
		}
		if cred := creds[int(who)%len(creds)]; cred != "" {
			req.Header.Set("Authorization", "Bearer "+cred)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case 200:
		case 400, 401, 403, 404:
			var env struct {
				Error *struct{ Code, Message string }
			}
			if json.Unmarshal(b, &env) != nil || env.Error == nil || env.Error.Code == "" || env.Error.Message == "" || strings.ContainsAny(env.Error.Message, "\r\n") {
				t.Fatalf("%s %q: %d without a one-line error envelope: %s", id, body, resp.StatusCode, b)
			}
		case 301, 307, 308, 405:
			// the mux's answers to unclean paths
		default:
			t.Fatalf("%s on %q, body %q: %d %s", what, id, body, resp.StatusCode, b)
		}
		if err := m.Pool().CheckInvariants(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Allocation(ctx, a.ID); err != nil {
			t.Fatalf("allocation after the report: %v", err)
		}
	})
}
