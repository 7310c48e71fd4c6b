package bridgeagent

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
)

// FuzzCopyCheckAPI sends arbitrary bodies and pair IDs to a host agent's
// own routes (the copy check and the status; the pair routes are the
// agentapi server's, which FuzzHandler covers). Invariants: never a 5xx
// but 502 (the copy failed) and 501, a refusal is the JSON error envelope
// with a one-line message, and a call without the credential is 401.
func FuzzCopyCheckAPI(f *testing.F) {
	f.Add(true, "1", `{"offset":0,"data":"AQID"}`, true)
	f.Add(true, "5", `{"offset":0,"data":""}`, true)
	f.Add(true, "0", `{"offset":0,"data":"!!"}`, true)
	f.Add(true, "16777216", `{"offset":1073741825,"data":"AQID"}`, true)
	f.Add(false, "", ``, true)
	f.Add(true, "7", `{"offset":-1}`, false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := Start(ctx, Options{Role: bridge.RoleHost, Ports: 32, HostID: "h1", Insecure: true, Log: quiet(),
		Keepalive: 50 * time.Millisecond, DeadAfter: time.Second, CompletionTimeout: time.Second,
		Listen: netip.MustParseAddrPort("127.0.0.1:0")})
	if err != nil {
		f.Fatal(err)
	}
	defer a.Wait()
	defer cancel()
	a.SetCredential("cred")
	h := a.Handler()
	f.Fuzz(func(t *testing.T, copyCheck bool, pair, body string, auth bool) {
		method, path := http.MethodGet, "/agent/v1/status"
		if copyCheck {
			method, path = http.MethodPost, "/agent/v1/pairs/"+pair+"/copy-check"
		}
		req, err := http.NewRequest(method, "http://agent"+path, strings.NewReader(body))
		if err != nil {
			return // not a URL
		}
		if auth {
			req.Header.Set("Authorization", "Bearer cred")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		b, _ := io.ReadAll(rec.Result().Body)
		switch c := rec.Code; {
		case c == 301 || c == 307 || c == 308 || c == 404 && !copyCheck:
			return // the mux's own answers to unclean or unknown paths
		case c == 200:
			if !auth {
				t.Fatalf("%s %s without the credential: 200", method, path)
			}
			return
		case c >= 500 && c != 501 && c != 502:
			t.Fatalf("%s %s %q: %d %s", method, path, body, c, b)
		case !auth && c != 401 && c != 404 && c != 405:
			t.Fatalf("%s %s without the credential: %d", method, path, c)
		}
		var env struct {
			Error *struct{ Code, Message string }
		}
		if rec.Code != 404 && rec.Code != 405 {
			if json.Unmarshal(b, &env) != nil || env.Error == nil || env.Error.Code == "" || env.Error.Message == "" || strings.ContainsAny(env.Error.Message, "\r\n") {
				t.Fatalf("%s %s %q: %d without a one-line error envelope: %s", method, path, body, rec.Code, b)
			}
		}
	})
}
