package switchd

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/switchtest"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// recordHandler hands every record logged to it to a channel.
type recordHandler struct{ records chan slog.Record }

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h.records <- r:
	default: // the test has what it waits for
	}
	return nil
}
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordHandler) WithGroup(string) slog.Handler      { return h }

// watchLog runs WatchManager against url and returns the nth record it
// logs (from 1), with the versions it applied before it.
func watchLog(t *testing.T, url string, nth int) (slog.Record, []uint64) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	h := recordHandler{records: make(chan slog.Record, nth)}
	applied := make(chan uint64, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		WatchManager(ctx, ctlclient.New(url, "a-token-the-manager-does-not-know"), func(tb *table.Table) { applied <- tb.Version }, slog.New(h))
	}()
	defer func() { cancel(); <-done }()
	var r slog.Record
	for i := range nth {
		select {
		case r = <-h.records:
		case <-time.After(waitfor.Stall):
			t.Fatalf("WatchManager logged %d records within %v, want %d", i, waitfor.Stall, nth)
		}
	}
	var vs []uint64
	for len(applied) > 0 {
		vs = append(vs, <-applied)
	}
	return r, vs
}

// refusing answers as the manager does a token it does not know.
func refusing(w http.ResponseWriter, status int) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write([]byte(`{"error":{"code":"unauthorized","message":"this call reads the pool and needs a valid bearer token (Authorization: Bearer ...)"}}`))
}

// TestWatchManagerRefusedToken: finding 2 of the new user's trial. A
// manager that answers 401 or 403 was reached and refused the switch's
// token: an ERROR naming --token-file, not a warning that the manager is
// unreachable, and no "table in force" while none was ever installed. With
// a table installed (a token rotated later) the message names the version
// kept. Transport errors and invalid tables still say what they are.
func TestWatchManagerRefusedToken(t *testing.T) {
	t.Parallel()
	good := switchtest.Table()
	invalid := *switchtest.Table()
	invalid.Version = 2
	invalid.Pairs = append(invalid.Pairs, invalid.Pairs[0]) // duplicate ID
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, tc := range []struct {
		name    string
		serve   func(w http.ResponseWriter, r *http.Request, call int64)
		url     string // instead of a server of serve
		nth     int    // the record looked at (0: the first)
		level   slog.Level
		want    []string
		applied int
	}{
		{name: "401 at start", serve: func(w http.ResponseWriter, _ *http.Request, _ int64) { refusing(w, http.StatusUnauthorized) },
			level: slog.LevelError,
			want:  []string{"manager refused the switch's token", "--token-file", "$DXPU_TOKEN", "no table installed yet"}},
		{name: "403 at start", serve: func(w http.ResponseWriter, _ *http.Request, _ int64) { refusing(w, http.StatusForbidden) },
			level: slog.LevelError, want: []string{"manager refused the switch's token", "no table installed yet"}},
		{name: "401 after a table", serve: func(w http.ResponseWriter, _ *http.Request, call int64) {
			if call == 1 {
				writeJSON(t, w, good)
				return
			}
			refusing(w, http.StatusUnauthorized)
		}, level: slog.LevelError, want: []string{"manager refused the switch's token", "keeping table version 1 in force"}, applied: 1},
		{name: "401 after an invalid table", nth: 2, serve: func(w http.ResponseWriter, _ *http.Request, call int64) {
			switch call {
			case 1:
				writeJSON(t, w, good)
			case 2:
				writeJSON(t, w, &invalid)
			default:
				refusing(w, http.StatusUnauthorized)
			}
		}, level: slog.LevelError, want: []string{"manager refused the switch's token", "keeping table version 1 in force"}, applied: 1},
		{name: "invalid first table", serve: func(w http.ResponseWriter, _ *http.Request, _ int64) { writeJSON(t, w, &invalid) },
			level: slog.LevelError, want: []string{"invalid table", "no table installed yet"}},
		{name: "500", serve: func(w http.ResponseWriter, _ *http.Request, _ int64) {
			http.Error(w, "boom", http.StatusInternalServerError)
		},
			level: slog.LevelWarn, want: []string{"manager failed the table request", "no table installed yet"}},
		{name: "unreachable", url: closed.URL, level: slog.LevelWarn, want: []string{"manager unreachable", "no table installed yet"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url := tc.url
			if tc.serve != nil {
				var calls atomic.Int64
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					tc.serve(w, r, calls.Add(1))
				}))
				defer srv.Close()
				url = srv.URL
			}
			r, applied := watchLog(t, url, max(tc.nth, 1))
			msg := r.Message
			if r.Level != tc.level || len(applied) != tc.applied {
				t.Errorf("logged %s %q after applying %v; want level %s after %d tables", r.Level, msg, applied, tc.level, tc.applied)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("logged %q; want it to say %q", msg, w)
				}
			}
			if tc.level == slog.LevelError && strings.Contains(msg, "unreachable") {
				t.Errorf("logged %q: the manager answered, it is not unreachable", msg)
			}
		})
	}
}

func writeJSON(t *testing.T, w http.ResponseWriter, tb *table.Table) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(tb); err != nil {
		t.Error(err)
	}
}

// A switch whose token the manager refuses at its first answer ends at
// once with a usage error (exit 2 from the command), for its supervisor to
// show; one refused after a table was installed keeps running and
// retrying (the token may be rotated in the manager).
func TestRunEndsOnTokenRefusedAtStart(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { refusing(w, http.StatusUnauthorized) }))
	defer srv.Close()
	// A bound on a wrong answer (running on), not a wait for progress.
	rctx, rcancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer rcancel()
	err := Run(rctx, Options{Mode: "udp", UDPListen: "127.0.0.1:0", Manager: srv.URL, Token: "wrong"})
	if !errors.Is(err, ErrTokenRefused) || !errors.Is(err, apperr.ErrUsage) {
		t.Fatalf("Run with a refused token: %v (ran until its context ended: %v); want a usage error wrapping ErrTokenRefused", err, rctx.Err() != nil)
	}

	var calls atomic.Int64
	later := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 1 {
			writeJSON(t, w, switchtest.Table())
			return
		}
		refusing(w, http.StatusUnauthorized)
	}))
	defer later.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- WatchManager(ctx, ctlclient.New(later.URL, "rotated"), func(*table.Table) {}, nil)
	}()
	waitfor.Until(t, "the refusal after a table", func() bool { return calls.Load() >= 2 })
	select {
	case err := <-done:
		t.Fatalf("WatchManager returned %v after a refusal that followed a table; want it to keep retrying", err)
	default:
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("WatchManager at the end of its context: %v, want nil", err)
	}
}
