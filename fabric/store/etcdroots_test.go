package store

import (
	"context"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/secretfile"
	"github.com/dxpu/dxpu/internal/testcert"
)

// TestRootsCredsPerEndpoint: etcd's connections verify the server against
// the CA file as loaded last, for the host of the endpoint each dials: a
// server CA B signs for 127.0.0.1 is refused while the file holds A and
// accepted once it holds B and is re-read, dialled as 127.0.0.1; dialled
// as 127.0.0.2 or localhost (another endpoint of the same client) it is
// refused for the name. One tls.Config shared by all endpoints could not
// tell 127.0.0.1 from 127.0.0.2 (no SNI for an IP address), so the file
// was read once when --etcd named several.
func TestRootsCredsPerEndpoint(t *testing.T) {
	t.Parallel()
	caA := testcert.Write(t, t.TempDir(), testcert.Options{Serial: 0xA, CommonName: "CA A", CA: true})
	caB := testcert.Write(t, t.TempDir(), testcert.Options{Serial: 0xB, CommonName: "CA B", CA: true})
	leaf := testcert.Write(t, t.TempDir(), testcert.Options{Serial: 5, CommonName: "etcd", Issuer: &caB, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	addr := testcert.Serve(t, leaf)
	_, port, _ := net.SplitHostPort(addr)
	caFile := filepath.Join(t.TempDir(), "etcd-ca.pem")
	if err := os.WriteFile(caFile, caA.PEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	cas, err := secretfile.LoadCAPool("--etcd-ca-file", caFile)
	if err != nil {
		t.Fatal(err)
	}
	creds := &rootsCreds{base: defaultClientTLS(), roots: cas.Pool}
	// handshake as gRPC does for an endpoint: the authority is its
	// host:port, over a connection to the server.
	handshake := func(host string) error {
		raw, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, _, err := creds.Clone().ClientHandshake(ctx, net.JoinHostPort(host, port), raw)
		if err == nil {
			conn.Close()
		}
		return err
	}
	var uae x509.UnknownAuthorityError
	if err := handshake("127.0.0.1"); !errors.As(err, &uae) {
		t.Fatalf("etcd CA B signs, --etcd-ca-file holding A: %v, want x509.UnknownAuthorityError", err)
	}
	if err := os.WriteFile(caFile, caB.PEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := cas.Reload(); n != 1 || err != nil {
		t.Fatalf("Reload: %d, %v", n, err)
	}
	if err := handshake("127.0.0.1"); err != nil {
		t.Fatalf("etcd CA B signs, --etcd-ca-file re-read holding B: %v", err)
	}
	var he x509.HostnameError
	for _, host := range []string{"127.0.0.2", "localhost"} {
		if err := handshake(host); !errors.As(err, &he) {
			t.Errorf("endpoint %s, certificate for 127.0.0.1: %v, want x509.HostnameError", host, err)
		}
	}
}
