package managerd

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/testcert"
)

// selfSigned writes a certificate for 127.0.0.1 and its key as PEM files.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, der []byte) {
	t.Helper()
	return selfSignedSerial(t, dir, 1)
}

// selfSignedSerial is selfSigned with the certificate's serial number: a
// new pair over the files of the last one (cert.pem, key.pem in dir). It
// is a CA too: the etcd tests trust it as one.
func selfSignedSerial(t *testing.T, dir string, serial int64) (certFile, keyFile string, der []byte) {
	t.Helper()
	p := testcert.Write(t, dir, testcert.Options{Serial: serial, CommonName: "managerd test", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, CA: true})
	return p.CertFile, p.KeyFile, p.Cert.Raw
}

// TestEtcdTLSFromFlags: a client certificate alone (no CA) is used, and
// one half of it alone is refused; a CA alone is a reloadable pool,
// handed to the store for each new connection (the config's RootCAs stay
// unset).
func TestEtcdTLSFromFlags(t *testing.T) {
	t.Parallel()
	cert, key, _ := selfSigned(t, t.TempDir())
	et, err := etcdTLS("", cert, key)
	tc := et.tls
	if err != nil || tc == nil || et.pair == nil || tc.GetClientCertificate == nil || tc.RootCAs != nil || tc.InsecureSkipVerify || et.cas != nil {
		t.Fatalf("etcdTLS(\"\", cert, key) = %+v, %v; want a client certificate and the system CAs", et, err)
	}
	if c, err := tc.GetClientCertificate(&tls.CertificateRequestInfo{}); err != nil || c == nil || c.Leaf.SerialNumber.Int64() != 1 {
		t.Fatalf("GetClientCertificate: %v, %v; want the certificate of --etcd-cert", c, err)
	}
	if tc.MinVersion < tls.VersionTLS12 {
		t.Fatalf("MinVersion %x, want TLS 1.2 at least", tc.MinVersion)
	}
	for _, c := range [][2]string{{cert, ""}, {"", key}} {
		if et, err := etcdTLS("", c[0], c[1]); err == nil || !strings.Contains(err.Error(), "go together") {
			t.Errorf("etcdTLS(\"\", %q, %q) = %+v, %v; want the refusal", c[0], c[1], et, err)
		}
	}
	et, err = etcdTLS(cert, "", "")
	if tc := et.tls; err != nil || tc == nil || et.cas == nil || et.cas.Len() != 1 || tc.RootCAs != nil || tc.InsecureSkipVerify || tc.GetClientCertificate != nil || et.pair != nil {
		t.Fatalf("etcdTLS(ca, \"\", \"\") = %+v, %v; want the CA alone, as a pool", et, err)
	}
}

// TestServesTLS: with --tls-cert/--tls-key the API is served over TLS with
// that certificate, and the advertised URL is https.
func TestServesTLS(t *testing.T) {
	t.Parallel()
	cert, key, der := selfSigned(t, t.TempDir())
	d := startDaemon(t, Options{TLSCert: cert, TLSKey: key})
	if !strings.HasPrefix(d.base, "https://") {
		t.Fatalf("advertised %q, want https://", d.base)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(c)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	resp, err := hc.Get(d.base + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz over TLS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil || len(resp.TLS.PeerCertificates) == 0 || !resp.TLS.PeerCertificates[0].Equal(c) {
		t.Fatalf("GET /healthz over TLS: %d, TLS %v; want 200 with the configured certificate", resp.StatusCode, resp.TLS != nil)
	}
	if err := d.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
