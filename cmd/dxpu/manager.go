package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/manager/agentapi"
	"github.com/dxpu/dxpu/fabric/store"
)

// managerOptions are dxpu manager's flags.
type managerOptions struct {
	store      string
	etcd       string
	etcdPrefix string
	leaseTTL   int
	listen     string
	advertise  string
	tokenFile  string
	noAuth     bool
	initToken  bool
	reconcile  time.Duration
	tlsCert    string
	tlsKey     string
	etcdCA     string
	etcdCert   string
	etcdKey    string
}

// newManagerCmd builds `dxpu manager`, the control plane daemon.
func newManagerCmd(e *env) *cobra.Command {
	var fl managerOptions
	cmd := &cobra.Command{
		Use:   "manager",
		Short: "Run the control plane: GPU pool, allocation sagas, HTTP API",
		Long: `Manager runs dxpu's control plane. It keeps the pool of GPU boxes and
hosts, lends GPUs to hosts (reserve, program the GPU-side bridge, the switch
table and the host-side bridge, hot-add), and serves the HTTP+JSON API under
/v1, Prometheus metrics on /metrics and /healthz.

State lives in a bbolt file (--store, the default) or, with several managers,
in etcd (--etcd): the managers elect a leader through etcd, the others stand
by and answer 503 not_leader, and a standby takes over within the lease TTL
when the leader dies (at once when it stops cleanly).

Every call that changes state needs "Authorization: Bearer <token>" with the
token read from --token-file; --no-auth turns that off (for a lab only).
With --tls-cert and --tls-key the API is served over HTTPS, as it should be
wherever the token crosses a network.

Bridges that register with an "agent_url" are programmed through the agent
API (package fabric/manager/agentapi: PUT/DELETE /agent/v1/pairs/{id},
hot-add, hot-remove, surprise-remove), with the same bearer token. The
switch follows GET /v1/table?watch=1&version=N. Exit status: 0 on
SIGINT/SIGTERM, 2 for usage errors or when the store cannot be opened.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runManager(cmd, e, fl) },
	}

	f := cmd.Flags()
	f.StringVar(&fl.store, "store", "dxpu-manager.db", "bbolt file holding the pool (ignored with --etcd)")
	f.StringVar(&fl.etcd, "etcd", "", "comma-separated etcd v3 endpoints; enables leader election")
	f.StringVar(&fl.etcdPrefix, "etcd-prefix", "/dxpu/", "key prefix in etcd")
	f.IntVar(&fl.leaseTTL, "lease-ttl", 3, "leader lease in seconds (etcd): how long a dead leader is waited for")
	f.StringVar(&fl.listen, "listen", "127.0.0.1:7700", "HTTP listen address")
	f.StringVar(&fl.advertise, "advertise", "", "URL other managers and clients should use for this one (default http://<listen>)")
	f.StringVar(&fl.tokenFile, "token-file", "", "file holding the bearer token for mutating calls")
	f.BoolVar(&fl.noAuth, "no-auth", false, "accept mutating calls without a token (lab only)")
	f.BoolVar(&fl.initToken, "init-token", false, "first create --token-file (mode 0600, 32 random bytes in hex); refused if it exists")
	f.StringVar(&fl.etcdCA, "etcd-ca-file", "", "CA (PEM) of an etcd served over https")
	f.StringVar(&fl.etcdCert, "etcd-cert", "", "client certificate (PEM) for etcd")
	f.StringVar(&fl.etcdKey, "etcd-key", "", "client key (PEM) for etcd")
	f.StringVar(&fl.tlsCert, "tls-cert", "", "serve HTTPS with this certificate (PEM); needs --tls-key")
	f.StringVar(&fl.tlsKey, "tls-key", "", "private key (PEM) of --tls-cert")
	f.DurationVar(&fl.reconcile, "reconcile-interval", 30*time.Second, "how often to reconcile agents with the journal (negative: only at start-up)")
	return cmd
}

func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	if strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("token file %s: the token must be one word", path)
	}
	return tok, nil
}

func runManager(cmd *cobra.Command, e *env, fl managerOptions) error {
	var token string
	if fl.initToken {
		if fl.tokenFile == "" {
			return exitCodeError{2, errors.New("--init-token needs --token-file, the file to create")}
		}
		if err := createTokenFile(fl.tokenFile); err != nil {
			return exitCodeError{2, err}
		}
		e.log.Info("token file created", "path", fl.tokenFile)
	}
	switch {
	case fl.tokenFile != "" && fl.noAuth:
		return exitCodeError{2, errors.New("--token-file and --no-auth exclude each other")}
	case fl.tokenFile != "":
		t, err := readToken(fl.tokenFile)
		if err != nil {
			return exitCodeError{2, err}
		}
		token = t
	case !fl.noAuth:
		return exitCodeError{2, errors.New("--token-file is required (or --no-auth for a lab)")}
	default:
		e.log.Warn("authentication disabled: anyone who reaches the API can change the pool")
	}

	if (fl.tlsCert == "") != (fl.tlsKey == "") {
		return exitCodeError{2, errors.New("--tls-cert and --tls-key go together")}
	}
	if fl.tlsCert != "" {
		if _, err := tls.LoadX509KeyPair(fl.tlsCert, fl.tlsKey); err != nil {
			return exitCodeError{2, fmt.Errorf("--tls-cert/--tls-key: %w", err)}
		}
	}
	var st store.Store
	var err error
	if fl.etcd != "" {
		tc, terr := etcdTLS(fl.etcdCA, fl.etcdCert, fl.etcdKey)
		if terr != nil {
			return exitCodeError{2, terr}
		}
		st, err = store.OpenEtcd(store.EtcdConfig{Endpoints: strings.Split(fl.etcd, ","), Prefix: fl.etcdPrefix, LeaseTTL: fl.leaseTTL, TLS: tc})
	} else {
		st, err = store.OpenBolt(fl.store, 5*time.Second)
	}
	if err != nil {
		return exitCodeError{2, err}
	}
	defer st.Close()

	ln, err := net.Listen("tcp", fl.listen)
	if err != nil {
		return exitCodeError{2, err}
	}
	advertise := fl.advertise
	if advertise == "" {
		scheme := "http://"
		if fl.tlsCert != "" {
			scheme = "https://"
		}
		advertise = scheme + ln.Addr().String()
	}
	// Bridges that registered an agent_url are programmed over the agent
	// API, with the same token; the others follow /v1/table.
	agents := &agentapi.Client{Token: token}
	m, err := manager.New(manager.Config{Store: st, Token: token, ID: advertise, Logger: e.log, ReconcileInterval: fl.reconcile,
		GPUBridge: agentapi.GPUSide{Client: agents}, HostBridge: agentapi.HostSide{Client: agents}})
	if err != nil {
		ln.Close()
		return exitCodeError{2, err}
	}
	srv := &http.Server{Handler: m.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() {
		if fl.tlsCert != "" {
			errc <- srv.ServeTLS(ln, fl.tlsCert, fl.tlsKey)
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	e.log.Info("manager serving", "listen", ln.Addr().String(), "advertise", advertise, "store", storeName(fl.etcd, fl.store))

	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	select {
	case <-ctx.Done():
	case err := <-errc:
		m.Close()
		return exitCodeError{2, err}
	}
	e.log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	return m.Close()
}

// etcdTLS builds the TLS configuration for etcd from the flags (nil when
// none is given).
func etcdTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	if caFile == "" && certFile == "" && keyFile == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		b, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("--etcd-ca-file %s: no PEM certificate in it", caFile)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("--etcd-cert and --etcd-key go together")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cert/--etcd-key: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

func storeName(etcd, path string) string {
	if etcd != "" {
		return "etcd " + etcd
	}
	return "bbolt " + path
}
