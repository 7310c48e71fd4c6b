package testcert

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"slices"
	"testing"
	"time"
)

// TestWrite: the files hold a pair that loads, with the options asked for,
// both 0600; a second Write replaces them, mode included.
func TestWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := Write(t, dir, Options{})
	tc, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
	if err != nil {
		t.Fatalf("the pair written does not load: %v", err)
	}
	if c := tc.Leaf; c.SerialNumber.Int64() != 1 || c.Subject.CommonName != "dxpu test" || c.IsCA || !c.Equal(p.Cert) ||
		time.Until(c.NotAfter) <= 0 || time.Until(c.NotBefore) >= 0 {
		t.Errorf("default certificate: serial %v, CN %q, CA %v, valid %v..%v; want serial 1, \"dxpu test\", no CA, valid now",
			c.SerialNumber, c.Subject.CommonName, c.IsCA, c.NotBefore, c.NotAfter)
	}
	modes(t, p, 0o600)

	if err := os.Chmod(p.KeyFile, 0o644); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(2 * time.Hour).Truncate(time.Second)
	q := Write(t, dir, Options{Serial: 7, CommonName: "other", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, DNS: []string{"m.test"}, CA: true, NotAfter: until})
	if q.CertFile != p.CertFile || q.KeyFile != p.KeyFile {
		t.Fatalf("second Write: %+v, want the same files as %+v", q, p)
	}
	tc, err = tls.LoadX509KeyPair(q.CertFile, q.KeyFile)
	if err != nil {
		t.Fatalf("the pair written again does not load: %v", err)
	}
	c := tc.Leaf
	if c.SerialNumber.Int64() != 7 || c.Subject.CommonName != "other" || !c.NotAfter.Equal(until) || !c.Equal(q.Cert) {
		t.Errorf("certificate: serial %v, CN %q, not after %v; want 7, \"other\", %v", c.SerialNumber, c.Subject.CommonName, c.NotAfter, until)
	}
	if err := c.VerifyHostname("127.0.0.1"); err != nil {
		t.Errorf("IPs: %v", err)
	}
	if err := c.VerifyHostname("m.test"); err != nil {
		t.Errorf("DNS: %v", err)
	}
	if !c.IsCA || !c.BasicConstraintsValid || c.KeyUsage != x509.KeyUsageDigitalSignature|x509.KeyUsageCertSign ||
		!slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}) {
		t.Errorf("CA: IsCA %v, basic constraints %v, key usage %d, ext key usage %v; want a CA for signing, serving and clients",
			c.IsCA, c.BasicConstraintsValid, int(c.KeyUsage), c.ExtKeyUsage)
	}
	modes(t, q, 0o600)
}

func modes(t *testing.T, p Pair, want os.FileMode) {
	t.Helper()
	for _, f := range []string{p.CertFile, p.KeyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %#o, want %#o", f, fi.Mode().Perm(), want)
		}
	}
}

// TestServedSerial: the serial of the certificate a TLS server holds.
func TestServedSerial(t *testing.T) {
	t.Parallel()
	addr := Serve(t, Write(t, t.TempDir(), Options{Serial: 42}))
	if s, err := ServedSerial(addr); err != nil || s != 42 {
		t.Fatalf("ServedSerial: %d, %v; want 42", s, err)
	}
}

// TestWriteIssuer: a certificate Issuer signs verifies up to the issuer
// (and not up to another CA), its PEM is the CA file's content.
func TestWriteIssuer(t *testing.T) {
	t.Parallel()
	ca := Write(t, t.TempDir(), Options{Serial: 0xA, CommonName: "CA", CA: true})
	other := Write(t, t.TempDir(), Options{Serial: 0xB, CommonName: "other CA", CA: true})
	leaf := Write(t, t.TempDir(), Options{Serial: 3, Issuer: &ca, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if _, err := tls.LoadX509KeyPair(leaf.CertFile, leaf.KeyFile); err != nil {
		t.Fatalf("the pair Issuer signed does not load: %v", err)
	}
	if leaf.Cert.Issuer.CommonName != "CA" {
		t.Errorf("issuer %q, want CA", leaf.Cert.Issuer.CommonName)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca.PEM()) {
		t.Fatal("PEM: no certificate")
	}
	if _, err := leaf.Cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1"}); err != nil {
		t.Errorf("verify up to the issuer: %v", err)
	}
	others := x509.NewCertPool()
	others.AddCert(other.Cert)
	if _, err := leaf.Cert.Verify(x509.VerifyOptions{Roots: others}); err == nil {
		t.Error("verified up to a CA that did not sign it")
	}
}
