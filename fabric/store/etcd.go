package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"google.golang.org/grpc"
)

// EtcdConfig configures an etcd-backed store.
type EtcdConfig struct {
	Endpoints   []string      // e.g. http://127.0.0.1:2379
	Prefix      string        // key prefix; default "/dxpu/"
	DialTimeout time.Duration // default 5s
	// LeaseTTL is the leader's lease in seconds (default 3): a leader that
	// dies without resigning is replaced after at most this long.
	LeaseTTL int
	// TLS, if set, is used for https:// endpoints (client certificates
	// included).
	TLS *tls.Config
	// RootCAs, if set, is called at each new connection for the CAs that
	// sign etcd's certificates (TLS's RootCAs are then not used): a CA
	// file re-read later is trusted by the connections made after it,
	// each checked for the host of the endpoint it dials.
	RootCAs func() *x509.CertPool
}

// Etcd is a Store in etcd v3 with leader election.
type Etcd struct {
	cli    *clientv3.Client
	prefix string
	ttl    int

	mu       sync.Mutex
	session  *concurrency.Session
	election *concurrency.Election
	fenceKey string
	fenceRev int64
	// campaigned: once this store has taken part in an election, every
	// write must be fenced; a resigned store cannot write at all.
	campaigned bool
}

// OpenEtcd connects to etcd.
func OpenEtcd(cfg EtcdConfig) (*Etcd, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, fmt.Errorf("store: etcd: no endpoints")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "/dxpu/"
	}
	if !strings.HasSuffix(cfg.Prefix, "/") {
		cfg.Prefix += "/"
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 3
	}
	ccfg := clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		TLS:         cfg.TLS,
		Logger:      quietZap(),
	}
	if cfg.RootCAs != nil {
		base := cfg.TLS
		if base == nil {
			base = defaultClientTLS()
		}
		ccfg.TLS = base
		// Applied after the client's own credentials, so these win.
		ccfg.DialOptions = append(ccfg.DialOptions, grpc.WithTransportCredentials(&rootsCreds{base: base, roots: cfg.RootCAs}))
	}
	cli, err := clientv3.New(ccfg)
	if err != nil {
		return nil, fmt.Errorf("store: etcd %v: %w", cfg.Endpoints, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.DialTimeout)
	defer cancel()
	if _, err := cli.Get(ctx, cfg.Prefix+"probe"); err != nil {
		cli.Close()
		return nil, fmt.Errorf("store: etcd %v: %w", cfg.Endpoints, err)
	}
	return &Etcd{cli: cli, prefix: cfg.Prefix, ttl: cfg.LeaseTTL}, nil
}

func (s *Etcd) key(k string) string { return s.prefix + "data/" + k }

func (s *Etcd) Get(ctx context.Context, key string) ([]byte, error) {
	resp, err := s.cli.Get(ctx, s.key(key))
	if err != nil {
		return nil, fmt.Errorf("store: etcd get %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, ErrNotFound
	}
	return resp.Kvs[0].Value, nil
}

func (s *Etcd) List(ctx context.Context, prefix string) ([]KV, error) {
	resp, err := s.cli.Get(ctx, s.key(prefix), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("store: etcd list %s: %w", prefix, err)
	}
	out := make([]KV, len(resp.Kvs))
	base := len(s.key(""))
	for i, kv := range resp.Kvs {
		out[i] = KV{string(kv.Key[base:]), kv.Value}
	}
	return out, nil
}

// maxTxnOps stays under etcd's default limit of 128 operations per Txn.
const maxTxnOps = 100

// Apply writes the batch in one Txn, fenced on leadership once Campaign has
// succeeded. A batch of more than 100 operations (etcd caps a Txn at 128)
// is written in several Txns, in order; the manager makes such batches only
// to drop the measured RTTs of a removed box or host, where a partial write
// is harmless.
func (s *Etcd) Apply(ctx context.Context, ops ...Op) error {
	if err := checkOps(ops); err != nil {
		return err
	}
	for len(ops) > maxTxnOps {
		if err := s.apply(ctx, ops[:maxTxnOps]); err != nil {
			return err
		}
		ops = ops[maxTxnOps:]
	}
	return s.apply(ctx, ops)
}

func (s *Etcd) apply(ctx context.Context, ops []Op) error {
	s.mu.Lock()
	fenceKey, fenceRev, campaigned := s.fenceKey, s.fenceRev, s.campaigned
	s.mu.Unlock()
	if campaigned && fenceKey == "" {
		return ErrNotLeader
	}
	tops := make([]clientv3.Op, len(ops))
	for i, op := range ops {
		if op.Delete {
			tops[i] = clientv3.OpDelete(s.key(op.Key))
		} else {
			tops[i] = clientv3.OpPut(s.key(op.Key), string(op.Value))
		}
	}
	txn := s.cli.Txn(ctx)
	if fenceKey != "" {
		txn = txn.If(clientv3.Compare(clientv3.CreateRevision(fenceKey), "=", fenceRev))
	}
	resp, err := txn.Then(tops...).Commit()
	if err != nil {
		return fmt.Errorf("store: etcd txn: %w", err)
	}
	if !resp.Succeeded {
		return ErrNotLeader
	}
	return nil
}

func (s *Etcd) electionPrefix() string { return s.prefix + "election" }

// Campaign implements Elector.
func (s *Etcd) Campaign(ctx context.Context, id string) (<-chan struct{}, error) {
	s.mu.Lock()
	s.campaigned = true
	s.mu.Unlock()
	sess, err := concurrency.NewSession(s.cli, concurrency.WithTTL(s.ttl))
	if err != nil {
		return nil, fmt.Errorf("store: etcd session: %w", err)
	}
	e := concurrency.NewElection(sess, s.electionPrefix())
	if err := e.Campaign(ctx, id); err != nil {
		sess.Close()
		return nil, fmt.Errorf("store: etcd campaign: %w", err)
	}
	s.mu.Lock()
	s.session, s.election = sess, e
	s.fenceKey, s.fenceRev = e.Key(), e.Rev()
	s.mu.Unlock()

	lost := make(chan struct{})
	wctx, cancel := context.WithCancel(context.Background())
	watch := s.cli.Watch(wctx, e.Key(), clientv3.WithRev(e.Rev()+1))
	go func() {
		defer cancel()
		defer close(lost)
		for {
			select {
			case <-sess.Done():
				return
			case wr, ok := <-watch:
				if !ok {
					return
				}
				for _, ev := range wr.Events {
					if ev.Type == clientv3.EventTypeDelete {
						return
					}
				}
			}
		}
	}()
	return lost, nil
}

// Resign implements Elector.
func (s *Etcd) Resign(ctx context.Context) error {
	s.mu.Lock()
	sess, e := s.session, s.election
	s.session, s.election, s.fenceKey, s.fenceRev = nil, nil, "", 0
	s.mu.Unlock()
	if e == nil {
		return nil
	}
	err := e.Resign(ctx)
	if cerr := sess.Close(); err == nil {
		err = cerr
	}
	return err
}

// Leader implements Elector.
func (s *Etcd) Leader(ctx context.Context) (string, error) {
	resp, err := s.cli.Get(ctx, s.electionPrefix()+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return "", fmt.Errorf("store: etcd leader: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return "", ErrNotFound
	}
	return string(resp.Kvs[0].Value), nil
}

// Close resigns (so a standby takes over at once) and disconnects.
func (s *Etcd) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s.Resign(ctx)
	return s.cli.Close()
}
