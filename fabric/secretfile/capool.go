package secretfile

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"

	"github.com/dxpu/dxpu/fabric/oneline"
)

// maxCAFile bounds a CA bundle: the system's whole bundle is under 1 MiB.
const maxCAFile = 16 << 20

// CAPool is the CA certificates of a PEM file (--agent-ca-file,
// --etcd-ca-file, --manager-ca-file) that Reload reads again while TLS
// runs, so that an operator rotating a CA needs no restart. New
// handshakes verify against the pool loaded last (Transport, or Pool
// called at each handshake); connections already open keep theirs. A CA file is
// public: it is not held to Open's owner and mode checks, but it must be
// a regular file (a FIFO would hang the reload).
type CAPool struct {
	flag, file string
	base       *x509.CertPool // nil, or the certificates every load starts from

	mu  sync.Mutex // orders Reloads: an older read never replaces a newer one
	cur atomic.Pointer[caSet]
}

// caSet is one load of the file.
type caSet struct {
	pool *x509.CertPool
	n    int // certificates read from the file
}

// LoadCAPool reads the CA certificates of file, named by flag in errors.
func LoadCAPool(flag, file string) (*CAPool, error) {
	return LoadCAPoolOnto(nil, flag, file)
}

// LoadCAPoolOnto is LoadCAPool with base's certificates in every pool it
// loads (nil: none).
func LoadCAPoolOnto(base *x509.CertPool, flag, file string) (*CAPool, error) {
	p := &CAPool{flag: flag, file: file, base: base}
	if _, err := p.Reload(); err != nil {
		return nil, err
	}
	return p, nil
}

// Flag and File name the pool's file as its daemon's flags do.
func (p *CAPool) Flag() string { return p.flag }
func (p *CAPool) File() string { return p.file }

// Reload reads the file again and returns how many certificates it holds.
// On error (one line naming the flag, the file and why: unreadable, not a
// regular file, too large, no PEM certificate in it) the pool loaded
// before stays in use.
func (p *CAPool) Reload() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, err := readCAFile(p.flag, p.file)
	if err != nil {
		return 0, err
	}
	pool := x509.NewCertPool()
	if p.base != nil {
		pool = p.base.Clone()
	}
	// As AppendCertsFromPEM, counting: other blocks and certificates that
	// do not parse are skipped.
	n := 0
	for len(b) > 0 {
		var block *pem.Block
		if block, b = pem.Decode(b); block == nil {
			break
		}
		if block.Type != "CERTIFICATE" || len(block.Headers) != 0 {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			continue
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return 0, fmt.Errorf("%s %s: holds no PEM certificate", p.flag, oneline.Name(p.file))
	}
	p.cur.Store(&caSet{pool: pool, n: n})
	return n, nil
}

// readCAFile reads path whole: a regular file (openPublic) of at most
// maxCAFile bytes.
func readCAFile(flag, path string) ([]byte, error) {
	f, err := openPublic(flag, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCAFile+1))
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is said once, after the flag
		}
		return nil, fmt.Errorf("%s %s: %w", flag, oneline.Name(path), err)
	}
	if len(b) > maxCAFile {
		return nil, fmt.Errorf("%s %s: larger than %d bytes; it should hold PEM CA certificates", flag, oneline.Name(path), maxCAFile)
	}
	return b, nil
}

// ReloadAndLog is Reload in one line on log, its message starting with
// why (e.g. "SIGHUP"): on success the flag, the file and the number of
// certificates; on failure the error, which names the flag, the file and
// why.
func (p *CAPool) ReloadAndLog(log *slog.Logger, why string) error {
	n, err := p.Reload()
	if err != nil {
		log.Error(why+": CA file not reloaded; the previous CAs stay in use", "err", err)
		return err
	}
	log.Info(why+": CA file reloaded", "flag", p.flag, "file", p.file, "certificates", n)
	return nil
}

// Pool is the pool loaded last. Callers must not change it.
func (p *CAPool) Pool() *x509.CertPool { return p.cur.Load().pool }

// Len is the number of certificates the file held at the last load.
func (p *CAPool) Len() int { return p.cur.Load().n }

// Transport returns an http.RoundTripper for a client whose servers p's
// CAs sign: each request goes through a clone of base (not used
// otherwise) whose TLSClientConfig.RootCAs is the pool loaded last, so
// crypto/tls verifies the chain and the name as always. After a Reload
// the next request takes a new clone, and new connections; the clone
// before closes its idle connections and lets those in use finish.
func (p *CAPool) Transport(base *http.Transport) http.RoundTripper {
	return &caTransport{p: p, base: base}
}

type caTransport struct {
	p    *CAPool
	base *http.Transport

	mu  sync.Mutex
	set *caSet // the load tr was made for
	tr  *http.Transport
}

func (t *caTransport) current() *http.Transport {
	set := t.p.cur.Load()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.set != set {
		tr := t.base.Clone()
		if tr.TLSClientConfig == nil {
			tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		tr.TLSClientConfig.RootCAs = set.pool
		if t.tr != nil {
			t.tr.CloseIdleConnections()
		}
		t.set, t.tr = set, tr
	}
	return t.tr
}

func (t *caTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.current().RoundTrip(req)
}

// CloseIdleConnections is http.Client.CloseIdleConnections's.
func (t *caTransport) CloseIdleConnections() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tr != nil {
		t.tr.CloseIdleConnections()
	}
}
