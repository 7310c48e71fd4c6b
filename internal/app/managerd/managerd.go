package managerd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/manager/agentapi"
	"github.com/dxpu/dxpu/fabric/secretfile"
	"github.com/dxpu/dxpu/fabric/store"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/app/httpguard"
	"github.com/dxpu/dxpu/internal/app/units"
)

// Options are `dxpu manager`'s flags, and the logger.
type Options struct {
	Store               string // bbolt file (without Etcd)
	Etcd                string // comma-separated etcd endpoints
	EtcdPrefix          string
	LeaseTTL            int // seconds
	Listen              string
	Advertise           string // default: http(s)://<listen>
	TokenFile           string
	InitToken           bool
	ReadTokenFile       string
	NoAuth              bool
	AgentCAFile         string
	AllowInsecureAgents bool
	MaxConns            int
	ReconcileInterval   time.Duration
	TLSCert, TLSKey     string
	EtcdCAFile          string
	EtcdCert, EtcdKey   string
	Log                 *slog.Logger
	// HUP gets the SIGHUPs, subscribed by the caller before Run (the
	// default action ends the process): each re-reads the TLS files, key
	// pairs and CA files. nil: none.
	HUP <-chan os.Signal

	// MaxAnonConnsPerClient bounds one address's connections that show no
	// credential (0: manager.DefaultMaxAnonConnsPerClient).
	MaxAnonConnsPerClient int
	// MaxConnsPerCredential bounds the connections of the read-only token
	// and of each agent credential (0: MaxConns/8).
	MaxConnsPerCredential int
	// DegradedAfter: a pair down that long degrades its allocation (0:
	// manager.DefaultDegradedAfter).
	DegradedAfter time.Duration
	// UnreachableAfter: a box agent silent that long to the reconciler is
	// reported unreachable (0: manager.DefaultUnreachableAfter).
	UnreachableAfter time.Duration
}

// Run checks o, opens the store, and serves the manager's API until ctx
// ends (then it shuts down cleanly and returns nil).
func Run(ctx context.Context, o Options) error {
	var token, readToken string
	if o.MaxConns <= 0 {
		return apperr.Usage(fmt.Errorf("--max-conns %d: want at least 1", o.MaxConns))
	}
	if o.MaxAnonConnsPerClient < 0 {
		return apperr.Usage(fmt.Errorf("--max-anon-conns-per-client %d: want at least 1", o.MaxAnonConnsPerClient))
	}
	if o.MaxConnsPerCredential < 0 {
		return apperr.Usage(fmt.Errorf("--max-conns-per-credential %d: want at least 1 (0: --max-conns/8)", o.MaxConnsPerCredential))
	}
	if o.UnreachableAfter < 0 {
		return apperr.Usage(units.Errorf("--unreachable-after %v: want a positive duration such as 30s", o.UnreachableAfter))
	}
	if o.DegradedAfter < 0 {
		return apperr.Usage(units.Errorf("--degraded-after %v: want a positive duration such as 10s", o.DegradedAfter))
	}
	if err := httpguard.CheckListenAddr("listen", o.Listen); err != nil {
		return err // --listen= bound every address on a random port
	}
	// Advertised to other managers and clients as the leader's URL: one
	// that is not a URL was taken and handed out.
	if o.Advertise != "" {
		u, err := url.Parse(o.Advertise)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return apperr.Usage(fmt.Errorf("--advertise %q: want an http(s) URL such as http://10.0.0.2:7700", o.Advertise))
		}
	}
	switch {
	case o.TokenFile != "" && o.NoAuth:
		return apperr.Usage(errors.New("--token-file and --no-auth exclude each other"))
	case o.ReadTokenFile != "" && o.NoAuth:
		// The read-only token limited nothing: every call was accepted.
		return apperr.Usage(errors.New("--read-token-file and --no-auth exclude each other"))
	case o.InitToken && o.TokenFile == "":
		return apperr.Usage(errors.New("--init-token needs --token-file"))
	case o.TokenFile != "":
		// --init-token creates the file only where nothing is (O_EXCL,
		// never through a link); a file already there is loaded with every
		// check, so one another user planted is refused, not adopted.
		created := false
		if o.InitToken {
			t, err := manager.CreateTokenFileFor("--token-file", o.TokenFile)
			switch {
			case err == nil:
				token, created = t, true
				o.Log.Info("created a token file", "path", o.TokenFile)
			case !errors.Is(err, fs.ErrExist):
				return apperr.Usage(err)
			}
		}
		if !created {
			t, err := manager.LoadTokenFileFor("--token-file", o.TokenFile)
			if err != nil {
				return apperr.Usage(err)
			}
			token = t
		}
		if o.ReadTokenFile != "" {
			var err error
			if readToken, err = manager.LoadTokenFileFor("--read-token-file", o.ReadTokenFile); err != nil {
				return apperr.Usage(err)
			}
		}
	case !o.NoAuth:
		return apperr.Usage(errors.New("--token-file is required (or --no-auth for a lab)"))
	default:
		o.Log.Warn("authentication disabled: anyone who reaches the API can change the pool")
	}

	if (o.TLSCert == "") != (o.TLSKey == "") {
		return apperr.Usage(errors.New("--tls-cert and --tls-key go together"))
	}
	// The key is read through secretfile (a key others can read, or
	// chose, is refused), here and again on each SIGHUP; new handshakes
	// take the pair read last.
	var serverTLS *tls.Config
	var pairs []*secretfile.KeyPair
	if o.TLSCert != "" {
		k, err := secretfile.LoadKeyPair("--tls-cert", o.TLSCert, "--tls-key", o.TLSKey)
		if err != nil {
			return apperr.Usage(err)
		}
		serverTLS = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: k.GetCertificate}
		pairs = append(pairs, k)
	}
	// The CA files too are read again on each SIGHUP; new handshakes
	// verify against the CAs read last.
	var cas []reloader
	var agentCAs *secretfile.CAPool
	if o.AgentCAFile != "" {
		var err error
		if agentCAs, err = secretfile.LoadCAPool("--agent-ca-file", o.AgentCAFile); err != nil {
			return apperr.Usage(err)
		}
		cas = append(cas, agentCAs)
	}
	var st store.Store
	var err error
	if o.Etcd != "" {
		endpoints := strings.Split(o.Etcd, ",")
		et, terr := etcdTLS(o.EtcdCAFile, o.EtcdCert, o.EtcdKey)
		if terr != nil {
			return apperr.Usage(terr)
		}
		if et.pair != nil {
			pairs = append(pairs, et.pair)
		}
		var roots func() *x509.CertPool
		if et.cas != nil {
			cas = append(cas, et.cas)
			roots = et.cas.Pool
		}
		st, err = store.OpenEtcd(store.EtcdConfig{Endpoints: endpoints, Prefix: o.EtcdPrefix, LeaseTTL: o.LeaseTTL, TLS: et.tls, RootCAs: roots})
	} else {
		st, err = store.OpenBolt(o.Store, 5*time.Second)
	}
	if errors.Is(err, store.ErrDamaged) {
		return apperr.Failed(err) // the file, not the set-up, is wrong
	}
	if err != nil {
		return apperr.Usage(err)
	}
	defer st.Close()

	// An address in use is the environment's failure, exit 1, as in
	// every daemon (httpguard.ListenError).
	ln, err := httpguard.Listen("listen", o.Listen)
	if err != nil {
		return err
	}
	ln = manager.LimitListenerWith(ln, manager.ConnLimits{MaxConns: o.MaxConns, MaxAnonConnsPerClient: o.MaxAnonConnsPerClient,
		MaxConnsPerCredential: o.MaxConnsPerCredential})
	advertise := o.Advertise
	if advertise == "" {
		scheme := "http://"
		if o.TLSCert != "" {
			scheme = "https://"
		}
		advertise = scheme + ln.Addr().String()
	}
	// Bridges that registered an agent_url are programmed over the agent
	// API (https, each with its own credential); the others follow /v1/table.
	agents, err := agentapi.NewClient(agentapi.ClientConfig{CAs: agentCAs, AllowInsecure: o.AllowInsecureAgents})
	if err != nil {
		ln.Close()
		return apperr.Usage(err)
	}
	m, err := manager.New(manager.Config{Store: st, Token: token, ReadToken: readToken, AllowInsecureAgents: o.AllowInsecureAgents,
		ID: advertise, Logger: o.Log, ReconcileInterval: o.ReconcileInterval, DegradedAfter: o.DegradedAfter,
		UnreachableAfter: o.UnreachableAfter,
		GPUBridge:        agentapi.GPUSide{Client: agents}, HostBridge: agentapi.HostSide{Client: agents}})
	if err != nil {
		ln.Close()
		return apperr.Usage(err)
	}
	srv := manager.NewServer(m, manager.ServerConfig{})
	srv.TLSConfig = serverTLS
	hctx, hcancel := context.WithCancel(ctx)
	defer hcancel()
	go reloadOnHUP(hctx, o.HUP, pairs, o.Log, cas...)
	errc := make(chan error, 1)
	go func() {
		if serverTLS != nil {
			errc <- srv.ServeTLS(ln, "", "") // srv.TLSConfig's GetCertificate
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	o.Log.Info("manager serving", "listen", ln.Addr().String(), "advertise", advertise, "store", storeName(o.Etcd, o.Store))

	select {
	case <-ctx.Done():
	case err := <-errc:
		m.Close()
		return err
	}
	o.Log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	return m.Close()
}

// etcdClient is the TLS configuration for etcd (nil: none) and what
// SIGHUP re-reads of it.
type etcdClient struct {
	tls  *tls.Config
	pair *secretfile.KeyPair // --etcd-cert, --etcd-key (nil: none)
	cas  *secretfile.CAPool  // --etcd-ca-file (nil: the system's roots)
}

// etcdTLS builds the TLS configuration for etcd's endpoints from the
// flags: new connections take the client pair read last, and (through
// store.EtcdConfig.RootCAs, given cas.Pool) verify the server against the
// CAs read last, each for the host of the endpoint it dials, IP address
// or DNS name.
func etcdTLS(caFile, certFile, keyFile string) (etcdClient, error) {
	if caFile == "" && certFile == "" && keyFile == "" {
		return etcdClient{}, nil
	}
	e := etcdClient{tls: &tls.Config{MinVersion: tls.VersionTLS12}}
	if caFile != "" {
		var err error
		if e.cas, err = secretfile.LoadCAPool("--etcd-ca-file", caFile); err != nil {
			return etcdClient{}, err
		}
	}
	if (certFile == "") != (keyFile == "") {
		return etcdClient{}, errors.New("--etcd-cert and --etcd-key go together")
	}
	if certFile != "" {
		var err error
		if e.pair, err = secretfile.LoadKeyPair("--etcd-cert", certFile, "--etcd-key", keyFile); err != nil {
			return etcdClient{}, err
		}
		e.tls.GetClientCertificate = e.pair.GetClientCertificate
	}
	return e, nil
}

// reloader is a file SIGHUP re-reads: a key pair or a CA pool.
type reloader interface {
	ReloadAndLog(log *slog.Logger, why string) error
}

// reloadOnHUP re-reads every pair, then the other files (the CA files), on
// each signal of hup until ctx ends. A file that fails to load is one
// error line (the flag, the file and why) and the one read before stays
// in use: a botched rotation must not take the control plane down.
func reloadOnHUP(ctx context.Context, hup <-chan os.Signal, pairs []*secretfile.KeyPair, log *slog.Logger, more ...reloader) {
	var files []reloader
	for _, k := range pairs {
		files = append(files, k)
	}
	files = append(files, more...)
	for {
		select {
		case <-hup:
			if len(files) == 0 {
				log.Info("SIGHUP: no TLS files to re-read (no --tls-cert, --etcd-cert, --agent-ca-file or --etcd-ca-file)")
			}
			for _, f := range files {
				_ = f.ReloadAndLog(log, "SIGHUP") // logged; a failure is not fatal
			}
		case <-ctx.Done():
			return
		}
	}
}

func storeName(etcd, path string) string {
	if etcd != "" {
		return "etcd " + etcd
	}
	return "bbolt " + path
}
