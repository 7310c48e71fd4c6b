// Package testcert writes self-signed TLS certificates and their keys for
// tests: the daemons' --tls-cert/--tls-key, --agent-cert/--agent-key and
// --etcd-cert/--etcd-key files, written again with a new serial to test a
// reload, and CAs with the certificates they sign (Options.Issuer) for the
// CA files (--agent-ca-file, --manager-ca-file, --etcd-ca-file). Only
// tests import it (internal/layering keeps it out of the binary).
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// File names Write uses in its directory: a second Write to the same
// directory replaces the pair, as an operator rotating it would.
const (
	CertName = "cert.pem"
	KeyName  = "key.pem"
)

// Options shape the certificate. The zero value is serial 1, "dxpu test",
// no addresses, not a CA, valid from an hour ago to an hour from now.
type Options struct {
	Serial     int64  // 0: 1
	CommonName string // "": "dxpu test"
	IPs        []net.IP
	DNS        []string
	// CA makes it a CA that also serves and authenticates clients, so a
	// test can trust it as a root (--etcd-ca, RootCAs) and use it as a leaf.
	CA       bool
	NotAfter time.Time // zero: an hour from now
	// Issuer signs the certificate (a Pair Write made with CA set); nil:
	// it signs itself.
	Issuer *Pair
}

// Pair is what Write wrote: the two files and the certificate parsed.
type Pair struct {
	CertFile, KeyFile string
	Cert              *x509.Certificate // Cert.Raw is the DER in CertFile
	Key               *ecdsa.PrivateKey // the key in KeyFile
}

// Write makes an ECDSA P-256 key and a certificate it signs itself (or
// o.Issuer signs), and writes them as PEM to dir/cert.pem and dir/key.pem, both mode 0600 (over
// the files of an earlier Write). A failure fails tb.
func Write(tb testing.TB, dir string, o Options) Pair {
	tb.Helper()
	if o.Serial == 0 {
		o.Serial = 1
	}
	if o.CommonName == "" {
		o.CommonName = "dxpu test"
	}
	now := time.Now()
	if o.NotAfter.IsZero() {
		o.NotAfter = now.Add(time.Hour)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(o.Serial), Subject: pkix.Name{CommonName: o.CommonName},
		NotBefore: now.Add(-time.Hour), NotAfter: o.NotAfter, IPAddresses: o.IPs, DNSNames: o.DNS}
	if o.CA {
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	}
	parent, signer := tmpl, key
	if o.Issuer != nil {
		parent, signer = o.Issuer.Cert, o.Issuer.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	p := Pair{CertFile: filepath.Join(dir, CertName), KeyFile: filepath.Join(dir, KeyName), Cert: cert, Key: key}
	writeFile(tb, p.CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	writeFile(tb, p.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}))
	return p
}

// PEM is the certificate, PEM-encoded: a CA file's content.
func (p Pair) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.Cert.Raw})
}

// writeFile writes data to path with mode 0600, also where path was there
// with another mode (os.WriteFile keeps it).
func writeFile(tb testing.TB, path string, data []byte) {
	tb.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		tb.Fatal(err)
	}
}

// ServedSerial is the serial of the certificate a new TLS handshake with
// addr gets. It reads the certificate without trusting it: the tests check
// which pair a server holds, not that it is valid.
func ServedSerial(addr string) (int64, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), nil
}

// Serve listens on 127.0.0.1 with p's certificate, completes each TLS
// handshake and closes the connection, until the test ends; it returns
// the address.
func Serve(tb testing.TB, p Pair) string {
	tb.Helper()
	c, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
	if err != nil {
		tb.Fatal(err)
	}
	// h2 as etcd's gRPC server offers it: gRPC clients require it.
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{c}, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	return ln.Addr().String()
}
