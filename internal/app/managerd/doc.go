// Package managerd assembles the manager daemon behind `dxpu manager`:
// token files (created with InitToken, checked for mode 0600), TLS for the
// API and for etcd, the store (bbolt, or etcd with leader election), the
// connection-capped listener, the agent API client that programs bridges,
// and the HTTP server, which Run serves until its context ends.
//
// Every refusal before serving is apperr.ErrUsage (exit status 2).
package managerd
