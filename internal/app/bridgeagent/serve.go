package bridgeagent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/dxpu/dxpu/internal/app/apperr"
)

// Run is the daemon: it starts the agent and serves its API on
// o.AgentListen (https with o.CertFile and o.KeyFile; http only with
// o.Insecure) until ctx ends. ready, when set, gets the agent and the API's
// address once both serve.
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
	if tlsOn {
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return apperr.Usage(fmt.Errorf("--agent-cert/--agent-key: %w", err))
		}
		tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
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
	ln, err := net.Listen("tcp", o.AgentListen)
	if err != nil {
		return fmt.Errorf("--agent-listen %q: %w", o.AgentListen, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a, err := Start(ctx, o)
	if err != nil {
		ln.Close()
		return err
	}
	defer a.Wait()
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	// A hot-add waits for the link and enumerates over the fabric: allow
	// it longer than the manager's step timeout (10s by default).
	srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
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
