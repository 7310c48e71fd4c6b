package bridgeagent

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/dxpu/dxpu/fabric/secretfile"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/app/httpguard"
)

// Run is the daemon: it starts the agent and serves its API on
// o.AgentListen (https with o.CertFile and o.KeyFile; http only with
// o.Insecure), and its metrics on o.Metrics when set, until ctx ends.
// ready, when set, gets the agent and the API's address once both serve
// (Agent.MetricsAddr is the metrics' by then).
func Run(ctx context.Context, o Options, ready func(a *Agent, api net.Addr)) error {
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	tlsOn := o.CertFile != "" || o.KeyFile != ""
	switch {
	case o.AgentListen == "":
		return apperr.Usage(errors.New("--agent-listen: the manager reaches the agent there (HOST:PORT)"))
	case tlsOn && (o.CertFile == "" || o.KeyFile == ""):
		return apperr.Usage(errors.New("--agent-cert and --agent-key go together"))
	case !tlsOn && !o.Insecure:
		return apperr.Usage(errors.New("the agent API serves https (--agent-cert, --agent-key); plain http only with --insecure (a lab: the credential crosses the network in clear)"))
	case o.Credential == "":
		return apperr.Usage(errors.New("--agent-credential-file: the agent needs the credential the manager issued at registration (dxpu ctl box|host add --agent-credential-out FILE)"))
	}
	var tlsCfg *tls.Config
	var apiCert *secretfile.KeyPair
	if tlsOn {
		// The key through secretfile: one others can read, or chose, is
		// refused. New handshakes take the pair read last (SIGHUP).
		var err error
		if apiCert, err = secretfile.LoadKeyPair("--agent-cert", o.CertFile, "--agent-key", o.KeyFile); err != nil {
			return apperr.Usage(err)
		}
		tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: apiCert.GetCertificate}
	}
	// The options first, so that a bad flag is a usage error whatever the
	// address; then bind before Start, which logs the agent running and
	// (--vm) boots a guest: an address in use must end it before either.
	if err := o.fill(); err != nil {
		return err
	}
	if _, err := newReporter(o, nil, o.Log); err != nil {
		return err
	}
	ln, err := httpguard.Listen("agent-listen", o.AgentListen)
	if err != nil {
		return err
	}
	var mln net.Listener
	if o.Metrics != "" {
		if mln, err = httpguard.Listen("metrics", o.Metrics); err != nil {
			ln.Close()
			return err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a, err := Start(ctx, o)
	if err != nil {
		ln.Close()
		if mln != nil {
			mln.Close()
		}
		return err
	}
	defer a.Wait()
	a.apiCert.Store(apiCert)
	if mln != nil {
		msrv := serveMetrics(a, mln, o)
		// Before a.Wait (deferred earlier, run later): the last scrapes
		// end while the pairs are still there.
		defer func() {
			sctx, scancel := context.WithTimeout(context.Background(), time.Second)
			defer scancel()
			_ = msrv.Shutdown(sctx)
		}()
	}
	srv := newAPIServer(a, o)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln, tlsCfg) }()
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	// ready first: what it sets up (the SIGHUP handler) is in place by the
	// time a supervisor reads the line below and acts on it.
	if ready != nil {
		ready(a, ln.Addr())
	}
	o.Log.Info("agent API serving", "url", scheme+"://"+ln.Addr().String(), "role", o.Role)
	select {
	case <-ctx.Done():
	case err = <-errc:
		cancel()
		return fmt.Errorf("agent API: %w", err)
	case err = <-a.Lost():
		// Exit, so that a supervisor starts the agent again (with a
		// fresh guest) and the manager meanwhile sees it unreachable.
		cancel()
		_ = srv.Close()
		return err
	}
	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer scancel()
	_ = srv.Shutdown(sctx)
	return nil
}

// serveMetrics serves a's /metrics on ln, bounded as the bridge's and the
// switch's (httpguard.MetricsDefaults, or o.MetricsServer).
func serveMetrics(a *Agent, ln net.Listener, o Options) *httpguard.Server {
	addr := ln.Addr()
	a.metricsAddr.Store(&addr)
	srv := httpguard.ServeMetrics("agent metrics", ln, a.Registry(), o.MetricsServer, o.Log)
	o.Log.Info("agent metrics serving", "url", "http://"+addr.String()+"/metrics")
	return srv
}

// The agent API's server defaults (Options.APIServer, zero fields). A
// hot-add waits for the link and enumerates over the fabric: a request is
// allowed longer than the manager's step timeout (10s by default). The
// manager's connections show the credential and are exempt from the
// per-address cap; an anonymous client holds at most APIMaxConnsPerAddr,
// and its idle ones are closed first when room is needed.
const (
	APIReadHeaderTimeout = 5 * time.Second
	APIReadTimeout       = 30 * time.Second
	APIWriteTimeout      = 60 * time.Second
	APIIdleTimeout       = 60 * time.Second
	APIMaxHeaderBytes    = 64 << 10
	APIMaxConns          = 256
	APIMaxConnsPerAddr   = 16

	// APIBodyTimeout bounds a request's body after its headers: the
	// manager sends each body (a pair's, 64 KiB at most; a copy check's,
	// 128 KiB) with its headers, so it arrives within a round trip.
	APIBodyTimeout = 5 * time.Second
)

// APIDefaults is the agent API's server configuration.
var APIDefaults = httpguard.Config{ReadHeaderTimeout: APIReadHeaderTimeout, ReadTimeout: APIReadTimeout, BodyTimeout: APIBodyTimeout,
	WriteTimeout: APIWriteTimeout, IdleTimeout: APIIdleTimeout, MaxHeaderBytes: APIMaxHeaderBytes,
	MaxConns: APIMaxConns, MaxConnsPerAddr: APIMaxConnsPerAddr}

// newAPIServer is the agent API's server: a's handler, the connection of
// a request carrying the agent's credential marked trusted (exempt from
// the per-address cap, never closed to make room), its error lines in
// o.Log, rate-limited.
func newAPIServer(a *Agent, o Options) *httpguard.Server {
	h := a.Handler()
	trusting := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if want := a.credential(); ok && want != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(want)) == 1 {
			httpguard.Trust(r.Context())
		}
		h.ServeHTTP(w, r)
	})
	return httpguard.New("agent API", trusting, o.APIServer, APIDefaults, o.Log)
}
