package switchd

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/internal/switchtest"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// tableRequest is one GET /v1/table a scripted manager answered: a watch
// from version, or a plain read (watch false).
type tableRequest struct {
	watch   bool
	version uint64
}

// scriptedManager answers the nth table request (from 1) with
// answer(n, request); a nil answer holds the request until the client
// gives up. It records every request.
type scriptedManager struct {
	answer func(n int, r tableRequest, w http.ResponseWriter) bool
	mu     sync.Mutex
	seen   []tableRequest
}

func (m *scriptedManager) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v, _ := strconv.ParseUint(q.Get("version"), 10, 64)
	req := tableRequest{watch: q.Get("watch") == "1", version: v}
	m.mu.Lock()
	m.seen = append(m.seen, req)
	n := len(m.seen)
	m.mu.Unlock()
	if !m.answer(n, req, w) {
		<-r.Context().Done()
	}
}

func (m *scriptedManager) requests() []tableRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]tableRequest(nil), m.seen...)
}

func tableVersion(v uint64) *table.Table {
	t := switchtest.Table()
	t.Version = v
	return t
}

// watchRun is WatchManager running against a scripted manager, logging to
// a recordHandler and reporting what it applied.
type watchRun struct {
	m       *scriptedManager
	records chan slog.Record
	applied chan uint64
	cancel  context.CancelFunc
	done    chan error
}

func startWatch(t *testing.T, answer func(n int, r tableRequest, w http.ResponseWriter) bool) *watchRun {
	t.Helper()
	w := &watchRun{m: &scriptedManager{answer: answer}, records: make(chan slog.Record, 64),
		applied: make(chan uint64, 64), done: make(chan error, 1)}
	srv := httptest.NewServer(w.m)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(t.Context())
	w.cancel = cancel
	go func() {
		w.done <- WatchManager(ctx, ctlclient.New(srv.URL, "token"), func(tb *table.Table) { w.applied <- tb.Version },
			slog.New(recordHandler{records: w.records}))
	}()
	t.Cleanup(func() { cancel(); <-w.done })
	return w
}

// waitApplied waits for the next version applied.
func (w *watchRun) waitApplied(t *testing.T) uint64 {
	t.Helper()
	select {
	case v := <-w.applied:
		return v
	case <-time.After(waitfor.Stall):
		t.Fatal("no table applied")
		return 0
	}
}

func (w *watchRun) waitRecord(t *testing.T) slog.Record {
	t.Helper()
	select {
	case r := <-w.records:
		return r
	case <-time.After(waitfor.Stall):
		t.Fatal("nothing logged")
		return slog.Record{}
	}
}

func retryIn(r slog.Record) time.Duration {
	var d time.Duration
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "retry_in" {
			d = a.Value.Duration()
		}
		return true
	})
	return d
}

// TestWatchManagerSkipsUnchanged: a watch that ends with the version
// already applied (the manager's watch timeout) applies nothing; the next
// version is applied once. Version 0 is a version like any other.
func TestWatchManagerSkipsUnchanged(t *testing.T) {
	t.Parallel()
	w := startWatch(t, func(n int, _ tableRequest, rw http.ResponseWriter) bool {
		switch {
		case n <= 4: // the table, then three watches that time out unchanged
			writeJSON(t, rw, tableVersion(0))
		case n == 5:
			writeJSON(t, rw, tableVersion(7))
		default:
			return false
		}
		return true
	})
	if v := w.waitApplied(t); v != 0 {
		t.Fatalf("applied version %d first, want 0", v)
	}
	if v := w.waitApplied(t); v != 7 {
		t.Fatalf("applied version %d after version 0's unchanged watches, want 7 (each version once)", v)
	}
	waitfor.Until(t, "the watch from version 7", func() bool {
		reqs := w.m.requests()
		return len(reqs) == 6
	})
	for i, r := range w.m.requests()[1:] {
		if want := []uint64{0, 0, 0, 0, 7}[i]; !r.watch || r.version != want {
			t.Fatalf("request %d: %+v; want a watch from version %d", i+2, r, want)
		}
	}
}

// TestWatchManagerWaitsOutInvalidTable: an invalid version is fetched
// once and then watched from, not fetched again at once in a loop.
func TestWatchManagerWaitsOutInvalidTable(t *testing.T) {
	t.Parallel()
	invalid := tableVersion(2)
	invalid.Pairs = append(invalid.Pairs, invalid.Pairs[0]) // duplicate ID
	w := startWatch(t, func(_ int, r tableRequest, rw http.ResponseWriter) bool {
		switch {
		case !r.watch:
			writeJSON(t, rw, tableVersion(1))
		case r.version == 1:
			writeJSON(t, rw, invalid)
		default:
			return false // a watch from version 2 waits
		}
		return true
	})
	if v := w.waitApplied(t); v != 1 {
		t.Fatalf("applied %d, want 1", v)
	}
	waitfor.Until(t, "a watch from the invalid version, or the invalid table fetched twice", func() bool {
		reqs := w.m.requests()
		last := reqs[len(reqs)-1]
		return len(reqs) > 3 || last.watch && last.version == 2
	})
	if reqs := w.m.requests(); len(reqs) != 3 {
		t.Fatalf("requests %+v; want the table, one watch that got the invalid version 2, then a watch from version 2", reqs)
	}
}

// TestWatchManagerBackoff: the first failure retries after a second (as
// logged), and an answer resets the backoff.
func TestWatchManagerBackoff(t *testing.T) {
	t.Parallel()
	w := startWatch(t, func(n int, _ tableRequest, rw http.ResponseWriter) bool {
		switch n {
		case 1, 3:
			http.Error(rw, "boom", http.StatusInternalServerError)
		case 2:
			writeJSON(t, rw, tableVersion(1))
		default:
			return false
		}
		return true
	})
	if r := w.waitRecord(t); retryIn(r) != time.Second {
		t.Fatalf("first failure logged %q retry_in=%v; want 1s", r.Message, retryIn(r))
	}
	w.waitApplied(t)
	if r := w.waitRecord(t); retryIn(r) != time.Second {
		t.Fatalf("failure after an answer logged %q retry_in=%v; want 1s (the backoff reset)", r.Message, retryIn(r))
	}
}

// TestWatchManagerQuietShutdown: the end of the context during a watch
// returns nil and logs nothing (the manager did not fail).
func TestWatchManagerQuietShutdown(t *testing.T) {
	t.Parallel()
	w := startWatch(t, func(n int, _ tableRequest, rw http.ResponseWriter) bool {
		if n == 1 {
			writeJSON(t, rw, tableVersion(1))
			return true
		}
		return false
	})
	w.waitApplied(t)
	waitfor.Until(t, "the watch in flight", func() bool { return len(w.m.requests()) == 2 })
	w.cancel()
	if err := <-w.done; err != nil {
		t.Fatalf("WatchManager at the end of its context: %v", err)
	}
	w.done <- nil // for the cleanup
	select {
	case r := <-w.records:
		t.Fatalf("logged %s %q at shutdown; want nothing", r.Level, r.Message)
	default:
	}
}

// TestWatchManagerRefusalError: the error of a refusal at start wraps
// both ErrTokenRefused and the manager's answer (its status).
func TestWatchManagerRefusalError(t *testing.T) {
	t.Parallel()
	w := startWatch(t, func(_ int, _ tableRequest, rw http.ResponseWriter) bool {
		refusing(rw, http.StatusForbidden)
		return true
	})
	var err error
	select {
	case err = <-w.done:
		w.done <- err // for the cleanup
	case <-time.After(waitfor.Stall):
		t.Fatal("WatchManager did not end at a refusal at start")
	}
	var ae *ctlclient.APIError
	if !errors.Is(err, ErrTokenRefused) || !errors.As(err, &ae) || ae.Status != http.StatusForbidden {
		t.Fatalf("WatchManager refused at start: %v; want ErrTokenRefused wrapping the manager's 403", err)
	}
}

// The wait between failed table requests doubles from 1s and stops at
// maxWatchBackoff: a manager back after a long outage is found within
// 30s, not after an hour.
func TestWatchBackoffCapped(t *testing.T) {
	t.Parallel()
	var got []time.Duration
	for b := time.Second; len(got) < 8; b = nextBackoff(b) {
		got = append(got, b)
	}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30, 30}
	for i := range want {
		want[i] *= time.Second
	}
	if !slices.Equal(got, want) {
		t.Fatalf("backoffs %v; want %v", got, want)
	}
}
