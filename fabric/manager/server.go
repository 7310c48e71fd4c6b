package manager

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/dxpu/dxpu/bridge/ratelog"
	"github.com/dxpu/dxpu/fabric/httpbody"
)

// ServerConfig bounds what clients can hold of the manager's HTTP server.
// Zero fields take the defaults.
type ServerConfig struct {
	// ReadHeaderTimeout bounds reading a request's headers (default 10s).
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included (default
	// 30s).
	ReadTimeout time.Duration
	// BodyTimeout bounds reading a request's body from the end of its
	// headers (default DefaultBodyTimeout; at most ReadTimeout less
	// ReadHeaderTimeout, so that ReadTimeout stays the bound of the whole
	// request): a request that declares a body it never sends is cut off
	// then. An answer written before the body was read to its end (a 401,
	// 403, 413, 429) closes the connection instead of waiting for the rest.
	BodyTimeout time.Duration
	// WriteTimeout bounds a request from its headers to the end of the
	// answer (default MaxWatch+30s). Watches end, with the unchanged
	// table or no events, a second before it, whatever timeout they ask.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle that long
	// (default 60s).
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds request headers (default 64 KiB).
	MaxHeaderBytes int
	// MaxWatchesPerClient bounds the table and event watches one client
	// address holds at once (default 8); one more is 429
	// too_many_watches. Behind a proxy every client is the proxy.
	MaxWatchesPerClient int
	// Requests bounds each client's requests (see RequestLimits).
	Requests RequestLimits
}

// Server defaults.
const (
	DefaultReadHeaderTimeout   = 10 * time.Second
	DefaultReadTimeout         = 30 * time.Second
	DefaultWriteTimeout        = MaxWatch + 30*time.Second
	DefaultIdleTimeout         = 60 * time.Second
	DefaultMaxHeaderBytes      = 64 << 10
	DefaultMaxWatchesPerClient = 8
	DefaultMaxConns            = 1024

	// DefaultBodyTimeout: the API's bodies are JSON documents of a few KiB
	// (1 MiB at most, maxBody) that clients send with their headers, so a
	// body arrives within a round trip; 5s is 200 KB/s for the largest.
	DefaultBodyTimeout = 5 * time.Second
)

func (c ServerConfig) withDefaults() ServerConfig {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&c.ReadTimeout, DefaultReadTimeout)
	def(&c.BodyTimeout, DefaultBodyTimeout)
	def(&c.WriteTimeout, DefaultWriteTimeout)
	def(&c.IdleTimeout, DefaultIdleTimeout)
	if c.MaxHeaderBytes <= 0 {
		c.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if c.MaxWatchesPerClient <= 0 {
		c.MaxWatchesPerClient = DefaultMaxWatchesPerClient
	}
	return c
}

// NewServer returns the manager's API server with every timeout and limit
// of cfg set. Serve it on LimitListener(ln, n) (or LimitListenerWith), so
// that connections are capped and admitted per client too:
//
//	srv := manager.NewServer(m, manager.ServerConfig{})
//	srv.Serve(manager.LimitListener(ln, manager.DefaultMaxConns))
//
// (or srv.ServeTLS with a certificate).
func NewServer(m *Manager, cfg ServerConfig) *http.Server {
	cfg = cfg.withDefaults()
	watches := &watchLimiter{next: m.Handler(), m: m, max: cfg.MaxWatchesPerClient, end: cfg.WriteTimeout - time.Second, by: map[string]int{}}
	srv := &http.Server{
		Handler: httpbody.Bound(&admission{next: watches, m: m, lim: cfg.Requests.withDefaults(),
			rates: map[string]*rate.Limiter{}, inFlight: map[string]int{}}, min(cfg.BodyTimeout, cfg.ReadTimeout-cfg.ReadHeaderTimeout)),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
	}
	var errLog *ratelog.Limiter
	srv.ErrorLog, errLog = errorLog(m.log)
	connHooks(srv, m.metrics)
	// Shutdown waits for requests in progress; a watch would hold it for up
	// to MaxWatch. Every request's context ends when Shutdown starts, so
	// watches answer at once and calls to agents are abandoned.
	// The error log's held-back counts come out every errorLogEvery while
	// the server serves, and all of them at Shutdown.
	base, stop := context.WithCancel(context.Background())
	srv.BaseContext = func(net.Listener) context.Context {
		go errLog.Run(base)
		return base
	}
	srv.RegisterOnShutdown(stop)
	return srv
}

// errorLogEvery is how often one kind of the server's error lines is
// logged; the others of the interval are counted ("http: TLS handshake
// error x2999 in the last 1s").
const errorLogEvery = time.Second

// errorLog is the server's ErrorLog: a WARN line per kind per
// errorLogEvery. net/http logs one line per failed connection (a TLS
// handshake error names each client), so a flood of bad connections would
// otherwise flood the log.
func errorLog(l *slog.Logger) (*log.Logger, *ratelog.Limiter) {
	lim := ratelog.New(l, errorLogEvery, nil)
	return log.New(errorLogWriter{lim}, "", 0), lim
}

type errorLogWriter struct{ lim *ratelog.Limiter }

func (w errorLogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	w.lim.Log(slog.LevelWarn, errorKind(msg), 1, msg)
	return len(p), nil
}

// errorKind is the key of one of net/http's error lines: its text before
// the first address or number ("http: TLS handshake error" for "http: TLS
// handshake error from 10.0.0.9:5123: EOF"), at most 64 bytes, so that
// the kinds stay few whoever connects.
func errorKind(msg string) string {
	if i := strings.IndexAny(msg, "0123456789[\"'"); i >= 0 {
		msg = msg[:i]
	}
	msg = strings.TrimSpace(msg)
	msg = strings.TrimSpace(strings.TrimSuffix(msg, " from"))
	msg = strings.TrimRight(msg, ":; ")
	if len(msg) > 64 {
		msg = msg[:64]
	}
	if msg == "" {
		msg = "http"
	}
	return msg
}

// watchLimiter caps the watches per client address and ends each before
// the server's write deadline would cut it.
type watchLimiter struct {
	next http.Handler
	m    *Manager
	max  int
	end  time.Duration // a watch answers this long after it starts, at the latest
	mu   sync.Mutex
	by   map[string]int // client address -> watches in progress
}

func isWatch(r *http.Request) bool {
	if r.Method != http.MethodGet || (r.URL.Path != "/v1/table" && r.URL.Path != "/v1/events") {
		return false
	}
	w := r.URL.Query().Get("watch")
	return w != "" && w != "0"
}

func clientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func (l *watchLimiter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !isWatch(r) {
		l.next.ServeHTTP(w, r)
		return
	}
	client := clientOf(r)
	l.mu.Lock()
	if l.by[client] >= l.max {
		l.mu.Unlock()
		l.m.metrics.watchesRefused.Inc()
		writeError(w, &APIError{Status: http.StatusTooManyRequests, Code: CodeTooManyWatches,
			Message: fmt.Sprintf("client %s already holds %d watches, the limit; end one before starting another", client, l.max)})
		return
	}
	l.by[client]++
	l.mu.Unlock()
	l.m.metrics.watches.Inc()
	defer func() {
		l.m.metrics.watches.Dec()
		l.mu.Lock()
		if l.by[client]--; l.by[client] == 0 {
			delete(l.by, client)
		}
		l.mu.Unlock()
	}()
	if l.end > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), l.end)
		defer cancel()
		r = r.WithContext(ctx)
	}
	l.next.ServeHTTP(w, r)
}
