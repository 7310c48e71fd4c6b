package manager

import (
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Admission. One client must not lock the others out (finding 4 of issue
// 20: 1030 keep-alive connections, each sending one tokenless GET /healthz,
// held every connection slot, so admins, agents or the switch got 503).
//
// A connection is pending until the server has read its first request,
// anonymous until one of its requests carries a credential the manager
// knows (admin or read-only token, an agent's credential), and from then on
// it belongs to that credential and is never cut to make room.
//
//   - Anonymous connections hold at most MaxConns-Reserved slots, and
//     MaxAnonConnsPerClient per source address; idle ones are closed after
//     AnonIdleTimeout.
//   - When a newcomer finds no room, the listener cuts an anonymous
//     connection for it: the one idle longest, else the one pending
//     longest (a client that has not sent a whole request, such as a
//     slowloris dripping its headers), sparing those whose whole request
//     is read or waits unread (pendingVictim). A client that sends its
//     request promptly is the newest pending connection and, once its
//     request is in, never cut, so a flood of slow connections, from
//     however many addresses, does not lock out a client that shows a
//     credential, even on a loaded machine. (A burst of newcomers larger
//     than the anonymous share, between a client's connect and its
//     request, still cuts it: nothing tells it from a slowloris then.)
//   - Only when there is nothing to cut does a newcomer get one of the
//     Reserved slots, on probation: it is served only if its first request
//     carries a credential. At most MaxProbation connections are on
//     probation at once (probationPerClient per address); past that the
//     one pending longest is cut. The rest of the reserve stays for
//     connections that showed a credential.
//   - A credential other than the admin token (the read-only token, each
//     agent's credential) holds at most MaxConnsPerCredential connections,
//     and those credentials together leave AdminReserved slots to the
//     admin token: a request that would take more is answered 503 and its
//     connection closed. So a read-only token cannot hold the manager.
//
// Per request, anonymous clients are rate-limited per address, and every
// client (address and credential) has a bound on requests in progress.
// /healthz and /metrics stay reachable without a credential (within the
// anonymous share and its rate).

// ConnLimits bounds the connections of LimitListenerWith. Zero fields
// take the defaults.
type ConnLimits struct {
	// MaxConns bounds all connections at once (default DefaultMaxConns).
	MaxConns int
	// Reserved of MaxConns are kept for clients that showed a credential
	// (default MaxConns/4): anonymous connections hold at most the rest.
	Reserved int
	// MaxAnonConnsPerClient bounds the anonymous connections of one
	// source address (default 64).
	MaxAnonConnsPerClient int
	// AnonIdleTimeout closes an anonymous keep-alive connection idle that
	// long (default 5s); the server's IdleTimeout applies to the others.
	AnonIdleTimeout time.Duration
	// MaxProbation bounds the connections admitted into the reserve
	// before showing a credential, from all addresses together (default
	// Reserved/4, at least 1).
	MaxProbation int
	// MaxConnsPerCredential bounds the connections of one credential other
	// than the admin token (the read-only token, one agent's credential),
	// from all addresses together (default MaxConns/8, at least 1).
	MaxConnsPerCredential int
	// AdminReserved of MaxConns are never held by the other credentials
	// (default Reserved/4, at least 1 below MaxConns).
	AdminReserved int
}

// Admission defaults.
const (
	DefaultMaxAnonConnsPerClient = 64
	DefaultAnonIdleTimeout       = 5 * time.Second
	// probationPerClient bounds the connections one address holds in the
	// reserve before it shows a credential.
	probationPerClient = 4
)

func (c ConnLimits) withDefaults() ConnLimits {
	if c.MaxConns <= 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.Reserved <= 0 {
		c.Reserved = c.MaxConns / 4
	}
	c.Reserved = min(c.Reserved, c.MaxConns-1)
	if c.MaxAnonConnsPerClient <= 0 {
		c.MaxAnonConnsPerClient = DefaultMaxAnonConnsPerClient
	}
	if c.AnonIdleTimeout <= 0 {
		c.AnonIdleTimeout = DefaultAnonIdleTimeout
	}
	if c.MaxProbation <= 0 {
		c.MaxProbation = max(1, c.Reserved/4)
	}
	if c.MaxConnsPerCredential <= 0 {
		c.MaxConnsPerCredential = max(1, c.MaxConns/8)
	}
	if c.AdminReserved <= 0 {
		c.AdminReserved = max(1, c.Reserved/4)
	}
	c.AdminReserved = min(c.AdminReserved, c.MaxConns-1)
	return c
}

// LimitListener is LimitListenerWith(ln, ConnLimits{MaxConns: maxConns}).
func LimitListener(ln net.Listener, maxConns int) net.Listener {
	return LimitListenerWith(ln, ConnLimits{MaxConns: maxConns})
}

// LimitListenerWith admits connections within lim (see ConnLimits). A
// connection that finds no room, after an idle or pending anonymous one was
// cut to make some, is answered 503 unavailable and closed at once, so
// descriptors stay bounded however many a client opens; a TLS client sees
// the refusal as a failed handshake. An anonymous connection admitted into
// the reserve (on probation) is served only if its first request carries a
// credential. Serve it with NewServer's server: its connection hooks tell
// the listener which connections are pending, idle, and which showed a
// credential.
func LimitListenerWith(ln net.Listener, lim ConnLimits) net.Listener {
	lim = lim.withDefaults()
	refusal := func(msg string) []byte {
		body, _ := json.Marshal(map[string]*APIError{"error": {Code: CodeUnavailable, Message: msg}})
		return fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
	return &admitListener{Listener: ln, lim: lim, idle: list.New(), pendAnon: list.New(), pendProb: list.New(),
		by: map[string]*addrConns{}, creds: map[string]int{},
		refuseFull: refusal(fmt.Sprintf("the manager holds %d connections, its limit; retry later", lim.MaxConns)),
		refuseAddr: refusal(fmt.Sprintf("this address holds %d connections without a credential, its limit; retry later", lim.MaxAnonConnsPerClient))}
}

type admitListener struct {
	net.Listener
	lim                    ConnLimits
	refuseFull, refuseAddr []byte
	metrics                atomic.Pointer[metrics] // set by NewServer's hooks

	mu                     sync.Mutex
	total, anon, probation int
	idle                   *list.List // idle anonymous connections, oldest first
	pendAnon, pendProb     *list.List // pending anonymous and probation connections, oldest first
	by                     map[string]*addrConns
	creds                  map[string]int // credential -> its connections
	nonAdmin               int            // connections of credentials other than the admin token
	peek                   [4096]byte     // pendingVictim's look into a socket
}

// addrConns are one address's anonymous connections.
type addrConns struct {
	anon, probation int
	idle            *list.List
}

// Connection classes.
const (
	connAnon = iota
	connProbation
	connAuthed
)

type admitConn struct {
	net.Conn
	l    *admitListener
	addr string
	// Guarded by l.mu.
	class    int
	cred     string // the credential it belongs to (connAuthed)
	idle     bool
	released bool
	inIdle   *list.Element // in l.idle
	inAddr   *list.Element // in the address's idle list
	inPend   *list.Element // in l.pendAnon or l.pendProb: no request read yet
	// Touched by the server's reading goroutine only, and read under l.mu.
	whole atomic.Bool // the server has read a whole request header (headerEnd)
	tail  [3]byte     // the last bytes read, for a header end across reads
}

func hostOf(a net.Addr) string {
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

func (l *admitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ac, victim, refusal := l.admit(c)
		if victim != nil {
			// Cut outside the lock; the server's Close finds it released.
			victim.Conn.Close()
			if mt := l.metrics.Load(); mt != nil {
				mt.connsEvicted.Inc()
			}
		}
		if ac != nil {
			return ac, nil
		}
		if mt := l.metrics.Load(); mt != nil {
			mt.connsRefused.Inc()
		}
		go refuse(c, refusal)
	}
}

// front is the first connection of a list, nil if it is empty.
func front(ls *list.List) *admitConn {
	if e := ls.Front(); e != nil {
		return e.Value.(*admitConn)
	}
	return nil
}

// admit decides on c: admitted (possibly on probation), possibly after
// choosing an idle or pending anonymous connection to cut, or refused.
func (l *admitListener) admit(c net.Conn) (ac *admitConn, victim *admitConn, refusal []byte) {
	addr := hostOf(c.RemoteAddr())
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.gauges()
	a := l.by[addr]
	if a == nil {
		a = &addrConns{idle: list.New()}
	}
	// Keep the address's entry while it holds anonymous connections (the
	// victim's release may have dropped it).
	defer func() {
		if a.anon+a.probation == 0 {
			delete(l.by, addr)
		} else {
			l.by[addr] = a
		}
	}()
	class := connAnon
	switch {
	case a.anon >= l.lim.MaxAnonConnsPerClient:
		// The address's own idle connection, never another address's.
		if victim = front(a.idle); victim == nil {
			class = connProbation
		}
	case l.total >= l.lim.MaxConns || l.anon >= l.lim.MaxConns-l.lim.Reserved:
		if victim = front(l.idle); victim == nil {
			victim = l.pendingVictim(l.pendAnon)
		}
		if victim == nil {
			class = connProbation
		}
	}
	if class == connProbation {
		full := l.probation >= l.lim.MaxProbation || l.total >= l.lim.MaxConns
		if full && a.probation < probationPerClient {
			victim = l.pendingVictim(l.pendProb)
		}
		if a.probation >= probationPerClient || full && victim == nil {
			if a.anon >= l.lim.MaxAnonConnsPerClient {
				return nil, nil, l.refuseAddr
			}
			return nil, nil, l.refuseFull
		}
	}
	if victim != nil {
		l.releaseLocked(victim)
	}
	ac = &admitConn{Conn: c, l: l, addr: addr, class: class}
	l.total++
	if class == connProbation {
		l.probation++
		a.probation++
		ac.inPend = l.pendProb.PushBack(ac)
	} else {
		l.anon++
		a.anon++
		ac.inPend = l.pendAnon.PushBack(ac)
	}
	return ac, victim, nil
}

// releaseLocked forgets c (closed, or cut to make room); once.
func (l *admitListener) releaseLocked(c *admitConn) {
	if c.released {
		return
	}
	c.released = true
	l.unidleLocked(c)
	l.unpendLocked(c)
	l.total--
	a := l.by[c.addr]
	switch c.class {
	case connAnon:
		l.anon--
		a.anon--
	case connProbation:
		l.probation--
		a.probation--
	case connAuthed:
		if l.creds[c.cred]--; l.creds[c.cred] == 0 {
			delete(l.creds, c.cred)
		}
		if c.cred != credAdmin {
			l.nonAdmin--
		}
	}
	if c.class != connAuthed && a.anon+a.probation == 0 {
		delete(l.by, c.addr)
	}
}

func (l *admitListener) unidleLocked(c *admitConn) {
	c.idle = false
	if c.inIdle != nil {
		l.idle.Remove(c.inIdle)
		l.by[c.addr].idle.Remove(c.inAddr)
		c.inIdle, c.inAddr = nil, nil
	}
}

// unpendLocked notes that the server has read a request on c (or c is
// gone): it is no longer pending.
func (l *admitListener) unpendLocked(c *admitConn) {
	if c.inPend == nil {
		return
	}
	if c.class == connProbation {
		l.pendProb.Remove(c.inPend)
	} else {
		l.pendAnon.Remove(c.inPend)
	}
	c.inPend = nil
}

// gauges publishes the connection counts (l.mu held).
func (l *admitListener) gauges() {
	if mt := l.metrics.Load(); mt != nil {
		mt.conns.WithLabelValues("anonymous").Set(float64(l.anon + l.probation))
		mt.conns.WithLabelValues("credentialed").Set(float64(l.total - l.anon - l.probation))
	}
}

// setState follows the server's view of c (http.Server.ConnState).
func (c *admitConn) setState(s http.ConnState) {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	switch s {
	case http.StateIdle:
		l.unpendLocked(c)
		c.idle = true
		if c.class == connAnon && !c.released && c.inIdle == nil {
			c.inIdle = l.idle.PushBack(c)
			c.inAddr = l.by[c.addr].idle.PushBack(c)
		}
	case http.StateActive:
		l.unpendLocked(c)
		l.unidleLocked(c)
	case http.StateClosed, http.StateHijacked:
		l.releaseLocked(c)
		l.gauges()
	}
}

// credAdmin is the admin token's credentialOf.
const credAdmin = "admin"

// credentialed moves c out of the anonymous connections for good, to
// cred's; it returns why not (cred holds its most connections) or "".
func (c *admitConn) credentialed(cred string) string {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.released || c.class == connAuthed {
		return ""
	}
	if cred != credAdmin {
		if n := l.creds[cred]; n >= l.lim.MaxConnsPerCredential {
			return fmt.Sprintf("%s holds %d connections, its limit; reuse one or retry later", credentialName(cred), n)
		}
		if l.nonAdmin >= l.lim.MaxConns-l.lim.AdminReserved {
			return fmt.Sprintf("credentials other than the admin token hold %d connections, their limit; retry later", l.nonAdmin)
		}
	}
	l.unidleLocked(c)
	l.unpendLocked(c)
	a := l.by[c.addr]
	if c.class == connProbation {
		l.probation--
		a.probation--
	} else {
		l.anon--
		a.anon--
	}
	if a.anon+a.probation == 0 {
		delete(l.by, c.addr)
	}
	c.class, c.cred = connAuthed, cred
	l.creds[cred]++
	if cred != credAdmin {
		l.nonAdmin++
	}
	l.gauges()
	return ""
}

// credentialName names a credentialOf for a message.
func credentialName(cred string) string {
	switch {
	case cred == credAdmin:
		return "the admin token"
	case cred == "read":
		return "the read-only token"
	case strings.HasPrefix(cred, "agent:"):
		kind, id, _ := strings.Cut(strings.TrimPrefix(cred, "agent:"), "/")
		return "the agent credential of " + kind + " " + id
	}
	return cred
}

func (c *admitConn) onProbation() bool {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	return c.class == connProbation
}

// SetReadDeadline shortens the wait of an idle anonymous connection for
// its next request (the server sets IdleTimeout right after it goes idle).
func (c *admitConn) SetReadDeadline(t time.Time) error {
	c.l.mu.Lock()
	if c.idle && c.class == connAnon {
		if short := time.Now().Add(c.l.lim.AnonIdleTimeout); t.IsZero() || short.Before(t) {
			t = short
		}
	}
	c.l.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

// Close frees the slot first: a client that sees the close finds it free.
func (c *admitConn) Close() error {
	c.l.mu.Lock()
	c.l.releaseLocked(c)
	c.l.gauges()
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// admitConnOf finds the listener's connection under the server's view of
// it (a TLS connection wraps it).
func admitConnOf(c net.Conn) *admitConn {
	for c != nil {
		switch v := c.(type) {
		case *admitConn:
			return v
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			return nil
		}
	}
	return nil
}

type connKey struct{}

// refuse answers a connection over the limit and closes it; the client's
// request is read (briefly) first, so that closing does not reset the
// connection before the answer is read.
func refuse(c net.Conn, answer []byte) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write(answer); err != nil {
		return
	}
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		tc.CloseWrite()
	}
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			return
		}
	}
}

// RequestLimits bounds requests per client. Zero fields take the defaults.
type RequestLimits struct {
	// AnonPerSecond is the rate of requests one address may make without
	// a credential (default 20 per second, bursts of twice that, at least 1):
	// /healthz, /metrics and refused calls. More are 429 rate_limited.
	AnonPerSecond float64
	// MaxAnonInFlight bounds the requests without a credential one
	// address has in progress (default 16).
	MaxAnonInFlight int
	// MaxInFlight bounds the requests one credential has in progress from
	// one address (default 256; watches count, and have their own bound).
	MaxInFlight int
}

// Request limit defaults.
const (
	DefaultAnonPerSecond   = 20
	DefaultMaxAnonInFlight = 16
	DefaultMaxInFlight     = 256
)

func (r RequestLimits) withDefaults() RequestLimits {
	if r.AnonPerSecond <= 0 {
		r.AnonPerSecond = DefaultAnonPerSecond
	}
	if r.MaxAnonInFlight <= 0 {
		r.MaxAnonInFlight = DefaultMaxAnonInFlight
	}
	if r.MaxInFlight <= 0 {
		r.MaxInFlight = DefaultMaxInFlight
	}
	return r
}

// admission applies RequestLimits and marks connections that showed a
// credential.
type admission struct {
	next http.Handler
	m    *Manager
	lim  RequestLimits

	mu       sync.Mutex
	rates    map[string]*rate.Limiter // anonymous address -> its bucket
	inFlight map[string]int           // client -> requests in progress
}

// maxRateEntries bounds the anonymous buckets kept; past it, full ones
// (clients quiet for a while) are dropped.
const maxRateEntries = 4096

// credentialOf names the credential r carries ("" for none): admin, read,
// or agent:<kind>/<id> on the agents' routes.
func (m *Manager) credentialOf(r *http.Request) string {
	switch m.roleOf(r) {
	case roleAdmin:
		return credAdmin
	case roleRead:
		return "read"
	}
	if !strings.HasPrefix(r.URL.Path, "/v1/agent/") {
		return ""
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return ""
	}
	if who, known := m.agentOf(strings.TrimSpace(tok)); known {
		return "agent:" + who.kind + "/" + who.id
	}
	return ""
}

func (a *admission) refuse(w http.ResponseWriter, reason string, status int, code, msg string) {
	a.m.metrics.requestsLimited.WithLabelValues(reason).Inc()
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	} else {
		w.Header().Set("Connection", "close")
	}
	writeError(w, &APIError{Status: status, Code: code, Message: msg})
}

func (a *admission) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ac, _ := r.Context().Value(connKey{}).(*admitConn)
	addr := clientOf(r)
	cred := a.m.credentialOf(r)
	max := a.lim.MaxInFlight
	key := cred + "@" + addr
	if cred != "" {
		if ac != nil {
			if why := ac.credentialed(cred); why != "" {
				a.refuse(w, "credential_conns", http.StatusServiceUnavailable, CodeUnavailable, why)
				return
			}
		}
	} else {
		if ac != nil && ac.onProbation() {
			a.refuse(w, "reserved", http.StatusServiceUnavailable, CodeUnavailable,
				"the manager keeps its remaining connections for clients with a credential, and this request carries none; retry later")
			return
		}
		if !a.allow(addr) {
			a.refuse(w, "rate", http.StatusTooManyRequests, CodeRateLimited,
				fmt.Sprintf("client %s sends more than %g requests a second without a credential; slow down", addr, a.lim.AnonPerSecond))
			return
		}
		max, key = a.lim.MaxAnonInFlight, "@"+addr
	}
	a.mu.Lock()
	if a.inFlight[key] >= max {
		a.mu.Unlock()
		who := "client " + addr
		if cred != "" {
			who += " (" + strings.SplitN(cred, ":", 2)[0] + " credential)"
		}
		a.refuse(w, "in_flight", http.StatusTooManyRequests, CodeRateLimited,
			fmt.Sprintf("%s has %d requests in progress, its limit; wait for one to end", who, max))
		return
	}
	a.inFlight[key]++
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		if a.inFlight[key]--; a.inFlight[key] == 0 {
			delete(a.inFlight, key)
		}
		a.mu.Unlock()
	}()
	a.next.ServeHTTP(w, r)
}

// allow takes a token from addr's bucket.
func (a *admission) allow(addr string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	lim := a.rates[addr]
	if lim == nil {
		if len(a.rates) >= maxRateEntries {
			now := time.Now()
			for k, l := range a.rates {
				if l.TokensAt(now) >= float64(l.Burst()) {
					delete(a.rates, k)
				}
			}
		}
		lim = rate.NewLimiter(rate.Limit(a.lim.AnonPerSecond), max(1, int(2*a.lim.AnonPerSecond)))
		a.rates[addr] = lim
	}
	return lim.Allow()
}

// connHooks link NewServer's server to a LimitListenerWith listener.
func connHooks(srv *http.Server, mt *metrics) {
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if ac := admitConnOf(c); ac != nil {
			ac.l.metrics.CompareAndSwap(nil, mt)
			return context.WithValue(ctx, connKey{}, ac)
		}
		return ctx
	}
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		if ac := admitConnOf(c); ac != nil {
			ac.setState(s)
		}
	}
}
