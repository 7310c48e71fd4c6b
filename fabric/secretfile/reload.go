package secretfile

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dxpu/dxpu/fabric/oneline"
)

// KeyPair is a certificate and its key, read by LoadX509KeyPair, that
// Reload replaces while TLS runs: operators rotate certificates (ACME,
// cert-manager) without restarting a daemon. GetCertificate (a server's)
// and GetClientCertificate (a client's) hand out the pair loaded last, so
// new handshakes take a rotated one and connections already open keep
// theirs.
type KeyPair struct {
	certFlag, certFile, keyFlag, keyFile string

	mu  sync.Mutex // orders Reloads: an older read never replaces a newer one
	cur atomic.Pointer[tls.Certificate]
}

// LoadKeyPair reads the pair as LoadX509KeyPair does and keeps the names
// for Reload.
func LoadKeyPair(certFlag, certFile, keyFlag, keyFile string) (*KeyPair, error) {
	k := &KeyPair{certFlag: certFlag, certFile: certFile, keyFlag: keyFlag, keyFile: keyFile}
	if _, err := k.Reload(); err != nil {
		return nil, err
	}
	return k, nil
}

// Reload reads the files again, with every check of LoadX509KeyPair, and
// returns the new certificate. On error (one line naming the flag and the
// file at fault) the pair loaded before stays in use.
func (k *KeyPair) Reload() (*x509.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	c, err := LoadX509KeyPair(k.certFlag, k.certFile, k.keyFlag, k.keyFile)
	if err != nil {
		return nil, err
	}
	if c.Leaf == nil { // X509KeyPair parses it unless GODEBUG says not to
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return nil, fmt.Errorf("%s %s: %w", k.certFlag, oneline.Name(k.certFile), err)
		}
	}
	k.cur.Store(&c)
	return c.Leaf, nil
}

// ReloadAndLog is Reload in one line on log, its message starting with
// why (e.g. "SIGHUP"): on success the flag, the file and the new
// certificate's subject, serial (hex, as openssl prints it) and expiry;
// on failure the error, which names the flag, the file and why.
func (k *KeyPair) ReloadAndLog(log *slog.Logger, why string) error {
	c, err := k.Reload()
	if err != nil {
		log.Error(why+": TLS certificate not reloaded; the previous one stays in use", "err", err)
		return err
	}
	log.Info(why+": TLS certificate reloaded", "flag", k.certFlag, "file", k.certFile, "subject", c.Subject.String(),
		"serial", fmt.Sprintf("%X", c.SerialNumber), "not_after", c.NotAfter.UTC().Format(time.RFC3339))
	return nil
}

// Certificate is the pair loaded last.
func (k *KeyPair) Certificate() *tls.Certificate { return k.cur.Load() }

// GetCertificate is tls.Config.GetCertificate for a server.
func (k *KeyPair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return k.cur.Load(), nil
}

// GetClientCertificate is tls.Config.GetClientCertificate for a client.
func (k *KeyPair) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return k.cur.Load(), nil
}
