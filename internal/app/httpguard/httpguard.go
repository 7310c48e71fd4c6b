// Package httpguard bounds what clients can hold of a daemon's small HTTP
// servers (the agent API, the /metrics of the bridge, the bridge agent and
// the switch): every timeout of net/http set, header bytes capped,
// connections capped in all and per source address, and the server's
// per-connection error lines (failed TLS handshakes, accept errors) sent
// through the daemon's slog logger, rate-limited.
//
// A connection over a cap is refused at accept: answered 503 (plain http)
// or closed (TLS, where a plain answer would be junk), never queued, after
// the oldest idle connection that never showed a credential, of that
// address (per-address cap) or of any (total cap), was closed to make room
// if there was one. A handler calls Trust for a request that carries the
// server's credential: that connection no longer counts against its
// address and is never closed to make room, so a flood of anonymous
// connections from other addresses cannot cut the credentialed client off.
package httpguard

import (
	"container/list"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/dxpu/dxpu/bridge/ratelog"
)

// Config is a server's timeouts and caps. Zero fields take the defaults of
// Defaults passed to New.
type Config struct {
	ReadHeaderTimeout time.Duration // the request line and headers
	ReadTimeout       time.Duration // the whole request, body included
	BodyTimeout       time.Duration // the body, from the end of the headers (see BodyBound)
	WriteTimeout      time.Duration // from the end of the headers to the end of the answer
	IdleTimeout       time.Duration // a keep-alive connection between requests
	MaxHeaderBytes    int
	MaxConns          int // connections at once, all clients
	MaxConnsPerAddr   int // connections at once from one source address (credentialed ones apart)
}

// The metrics servers' defaults (--metrics of the bridge, the bridge agent
// and the switch):
// a Prometheus scrape is one small GET per interval on one connection.
const (
	MetricsReadHeaderTimeout = 5 * time.Second
	MetricsReadTimeout       = 10 * time.Second
	MetricsBodyTimeout       = 5 * time.Second // a scrape has no body
	MetricsWriteTimeout      = 30 * time.Second
	MetricsIdleTimeout       = 30 * time.Second
	MetricsMaxHeaderBytes    = 16 << 10
	MetricsMaxConns          = 64
	MetricsMaxConnsPerAddr   = 8
)

// MetricsDefaults is the metrics servers' Config.
var MetricsDefaults = Config{ReadHeaderTimeout: MetricsReadHeaderTimeout, ReadTimeout: MetricsReadTimeout, BodyTimeout: MetricsBodyTimeout,
	WriteTimeout: MetricsWriteTimeout, IdleTimeout: MetricsIdleTimeout, MaxHeaderBytes: MetricsMaxHeaderBytes,
	MaxConns: MetricsMaxConns, MaxConnsPerAddr: MetricsMaxConnsPerAddr}

// WithDefaults fills c's zero fields from d.
func (c Config) WithDefaults(d Config) Config {
	set := func(v *time.Duration, dv time.Duration) {
		if *v <= 0 {
			*v = dv
		}
	}
	set(&c.ReadHeaderTimeout, d.ReadHeaderTimeout)
	set(&c.ReadTimeout, d.ReadTimeout)
	set(&c.BodyTimeout, d.BodyTimeout)
	set(&c.WriteTimeout, d.WriteTimeout)
	set(&c.IdleTimeout, d.IdleTimeout)
	seti := func(v *int, dv int) {
		if *v <= 0 {
			*v = dv
		}
	}
	seti(&c.MaxHeaderBytes, d.MaxHeaderBytes)
	seti(&c.MaxConns, d.MaxConns)
	seti(&c.MaxConnsPerAddr, d.MaxConnsPerAddr)
	c.MaxConnsPerAddr = max(1, min(c.MaxConnsPerAddr, c.MaxConns))
	return c
}

// Server is an http.Server with its connection caps; serve it with Serve.
type Server struct {
	*http.Server
	name string
	cfg  Config
	lim  *ratelog.Limiter
}

// New returns the server of h under cfg (zero fields from defaults). name
// says which server in log lines ("agent API", "metrics"); log receives
// the server's per-connection errors, at most one line a second with a
// count of the ones held back.
func New(name string, h http.Handler, cfg, defaults Config, logger *slog.Logger) *Server {
	cfg = cfg.WithDefaults(defaults)
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	lim := ratelog.New(logger, time.Second, nil)
	s := &Server{name: name, cfg: cfg, lim: lim, Server: &http.Server{
		Handler:           BodyBound(h, min(cfg.BodyTimeout, cfg.ReadTimeout-cfg.ReadHeaderTimeout)),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          log.New(errorWriter{name: name, lim: lim}, "", 0),
	}}
	s.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if gc := guardedOf(c); gc != nil {
			return context.WithValue(ctx, connKey{}, gc)
		}
		return ctx
	}
	s.ConnState = func(c net.Conn, st http.ConnState) {
		if gc := guardedOf(c); gc != nil {
			gc.setState(st)
		}
	}
	return s
}

// Config is the server's configuration, defaults filled in.
func (s *Server) Config() Config { return s.cfg }

// Serve serves on ln, capped, over TLS with tlsCfg when it is not nil,
// until the server is closed.
func (s *Server) Serve(ln net.Listener, tlsCfg *tls.Config) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.lim.Run(ctx)
	gl := newListener(ln, s.cfg, s.name, tlsCfg == nil, s.lim)
	if tlsCfg != nil {
		return s.Server.Serve(tls.NewListener(gl, tlsCfg))
	}
	return s.Server.Serve(gl)
}

// errorWriter is the server's ErrorLog: one key per server, so that a
// flood of lines naming as many client addresses is one line a second.
type errorWriter struct {
	name string
	lim  *ratelog.Limiter
}

func (w errorWriter) Write(p []byte) (int, error) {
	w.lim.Log(slog.LevelWarn, w.name+": connection errors", 1, w.name+": "+strings.TrimSpace(string(p)))
	return len(p), nil
}

// Trust marks the connection of the request whose context is ctx as
// credentialed: it no longer counts against its address's cap and is never
// closed to make room.
func Trust(ctx context.Context) {
	if gc, _ := ctx.Value(connKey{}).(*guardedConn); gc != nil {
		gc.trust()
	}
}

type connKey struct{}

// listener admits connections within the caps.
type listener struct {
	net.Listener
	cfg     Config
	name    string
	refusal []byte // nil: close without an answer (TLS)
	lim     *ratelog.Limiter
	// refusing bounds the refusals being answered at once; past it a
	// connection is closed without an answer.
	refusing chan struct{}

	mu    sync.Mutex
	total int
	idle  *list.List // idle anonymous connections, oldest first
	by    map[string]*addrConns
}

type addrConns struct {
	n    int        // anonymous connections
	idle *list.List // of them, the idle ones, oldest first
}

// maxRefusing bounds the refusals in progress (each lasts at most
// refuseFor).
const (
	maxRefusing = 64
	refuseFor   = 500 * time.Millisecond
)

func newListener(ln net.Listener, cfg Config, name string, answer bool, lim *ratelog.Limiter) *listener {
	l := &listener{Listener: ln, cfg: cfg, name: name, lim: lim, refusing: make(chan struct{}, maxRefusing),
		idle: list.New(), by: map[string]*addrConns{}}
	if answer {
		body, _ := json.Marshal(map[string]map[string]string{"error": {"code": "unavailable",
			"message": fmt.Sprintf("the %s holds its limit of connections (%d in all, %d per address); retry later", name, cfg.MaxConns, cfg.MaxConnsPerAddr)}})
		l.refusal = fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
	return l
}

type guardedConn struct {
	net.Conn
	l    *listener
	addr string
	// Guarded by l.mu.
	trusted, released bool
	inIdle, inAddr    *list.Element
}

func hostOf(a net.Addr) string {
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		gc, victim := l.admit(c)
		if victim != nil {
			victim.Conn.Close()
		}
		if gc != nil {
			return gc, nil
		}
		l.lim.Log(slog.LevelWarn, l.name+": connections refused", 1, l.name+": connection refused, at the limit",
			"client", c.RemoteAddr().String(), "max_conns", l.cfg.MaxConns, "max_conns_per_addr", l.cfg.MaxConnsPerAddr)
		l.refuse(c)
	}
}

// admit admits c, possibly closing an idle anonymous connection (victim)
// to make room, or refuses it (nil).
func (l *listener) admit(c net.Conn) (gc, victim *guardedConn) {
	addr := hostOf(c.RemoteAddr())
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.by[addr]
	switch {
	case a != nil && a.n >= l.cfg.MaxConnsPerAddr:
		if e := a.idle.Front(); e != nil {
			victim = e.Value.(*guardedConn)
		} else {
			return nil, nil
		}
	case l.total >= l.cfg.MaxConns:
		if e := l.idle.Front(); e != nil {
			victim = e.Value.(*guardedConn)
		} else {
			return nil, nil
		}
	}
	if victim != nil {
		l.releaseLocked(victim)
	}
	if a = l.by[addr]; a == nil {
		a = &addrConns{idle: list.New()}
		l.by[addr] = a
	}
	a.n++
	l.total++
	return &guardedConn{Conn: c, l: l, addr: addr}, victim
}

// refuse answers c (plain http) and closes it; the answer waits at most
// refuseFor for the client's request to be read, so that the close does
// not reset the connection before the client reads it.
func (l *listener) refuse(c net.Conn) {
	if l.refusal == nil {
		c.Close()
		return
	}
	select {
	case l.refusing <- struct{}{}:
	default:
		c.Close()
		return
	}
	go func() {
		defer func() { <-l.refusing }()
		defer c.Close()
		c.SetDeadline(time.Now().Add(refuseFor))
		if _, err := c.Write(l.refusal); err != nil {
			return
		}
		if tc, ok := c.(interface{ CloseWrite() error }); ok {
			tc.CloseWrite()
		}
		buf := make([]byte, 1024)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	}()
}

func (l *listener) releaseLocked(c *guardedConn) {
	if c.released {
		return
	}
	c.released = true
	l.total--
	if c.trusted {
		return
	}
	l.unidleLocked(c)
	a := l.by[c.addr]
	if a.n--; a.n == 0 {
		delete(l.by, c.addr)
	}
}

func (l *listener) unidleLocked(c *guardedConn) {
	if c.inIdle != nil {
		l.idle.Remove(c.inIdle)
		l.by[c.addr].idle.Remove(c.inAddr)
		c.inIdle, c.inAddr = nil, nil
	}
}

func (c *guardedConn) setState(s http.ConnState) {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	switch s {
	case http.StateIdle:
		if !c.trusted && !c.released && c.inIdle == nil {
			c.inIdle = l.idle.PushBack(c)
			c.inAddr = l.by[c.addr].idle.PushBack(c)
		}
	case http.StateActive:
		l.unidleLocked(c)
	case http.StateClosed, http.StateHijacked:
		l.releaseLocked(c)
	}
}

func (c *guardedConn) trust() {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.trusted || c.released {
		return
	}
	l.unidleLocked(c)
	if a := l.by[c.addr]; a != nil {
		if a.n--; a.n == 0 {
			delete(l.by, c.addr)
		}
	}
	c.trusted = true
}

// Close frees the slot first: a client that sees the close finds it free.
func (c *guardedConn) Close() error {
	c.l.mu.Lock()
	c.l.releaseLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// guardedOf finds the listener's connection under the server's view of it
// (a TLS connection wraps it).
func guardedOf(c net.Conn) *guardedConn {
	for c != nil {
		switch v := c.(type) {
		case *guardedConn:
			return v
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			return nil
		}
	}
	return nil
}
