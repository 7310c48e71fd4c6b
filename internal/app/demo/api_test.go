package demo

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestAPI: the in-process call sends the token and JSON body, decodes the
// answer, and turns an error status into an error naming the call.
func TestAPI(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get("Authorization") != "Bearer demo-token" || r.URL.Path != "/v1/echo" {
			http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		w.Write(b)
	})
	var out map[string]int
	if err := api(h, "POST", "/v1/echo", map[string]int{"n": 7}, &out); err != nil || out["n"] != 7 {
		t.Fatalf("echo: %v %v", out, err)
	}
	err := api(h, "GET", "/v1/other", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "GET /v1/other: 401") || errors.Is(err, io.EOF) {
		t.Fatalf("refused call: %v", err)
	}
}
