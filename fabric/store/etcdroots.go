package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"

	"google.golang.org/grpc/credentials"
)

// rootsCreds are etcd's transport credentials when the CAs may change
// (EtcdConfig.RootCAs): each new connection verifies the server as
// crypto/tls does, against the pool roots returns at that moment, for the
// host of the endpoint it dials. etcd's resolver gives each address its
// endpoint's host, which gRPC passes as the authority, so with several
// endpoints named by IP address each handshake checks its own (one
// tls.Config with VerifyConnection cannot tell them apart: a client sends
// no SNI for an IP address).
type rootsCreds struct {
	base  *tls.Config
	roots func() *x509.CertPool
}

// defaultClientTLS is the client configuration when none is given.
func defaultClientTLS() *tls.Config { return &tls.Config{MinVersion: tls.VersionTLS12} }

func (c *rootsCreds) now() credentials.TransportCredentials {
	cfg := c.base.Clone()
	cfg.RootCAs = c.roots()
	return credentials.NewTLS(cfg) // sets ServerName from the authority
}

func (c *rootsCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c.now().ClientHandshake(ctx, authority, raw)
}

func (c *rootsCreds) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("store: etcd: client credentials only")
}

func (c *rootsCreds) Info() credentials.ProtocolInfo { return c.now().Info() }

func (c *rootsCreds) Clone() credentials.TransportCredentials {
	return &rootsCreds{base: c.base.Clone(), roots: c.roots}
}

// OverrideServerName is gRPC's deprecated hook; the name comes from each
// endpoint instead.
func (c *rootsCreds) OverrideServerName(string) error { return nil }
