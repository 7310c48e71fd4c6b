package ctlclient_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
)

// TestWatchTimeoutWritesUs: the long polls send their timeout as `dxpu
// help units` spells durations (timeout=500us, never Go's 500µs, which
// the manager's logs and access logs would show).
func TestWatchTimeoutWritesUs(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var timeouts []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		timeouts = append(timeouts, r.URL.Query().Get("timeout"))
		mu.Unlock()
		_, _ = w.Write([]byte("{}"))
	}))
	defer srv.Close()
	c := ctlclient.New(srv.URL, "")
	if _, err := c.WatchTable(t.Context(), 3, 500*time.Microsecond); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Events(t.Context(), 0, "", 700*time.Microsecond); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(timeouts) != 2 || timeouts[0] != "500us" || timeouts[1] != "700us" {
		t.Errorf("the manager got timeout=%q, want 500us for the table and 700us for the events", timeouts)
	}
}
