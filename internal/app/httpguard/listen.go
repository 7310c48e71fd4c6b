package httpguard

import (
	"errors"
	"fmt"
	"net"

	"github.com/dxpu/dxpu/internal/app/apperr"
)

// Listen listens on TCP addr, given to a daemon as --flag: an address
// that is not HOST:PORT is a usage error naming the flag (it was a failed
// run, exit 1, as a port in use is), a failure to bind (the address in
// use, not this host's) is apperr.ErrFailed: the environment, not the
// options, is wrong (ListenError).
func Listen(flag, addr string) (net.Listener, error) {
	if err := CheckListenAddr(flag, addr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, ListenError(fmt.Errorf("--%s %q: %w", flag, addr, err))
	}
	return ln, nil
}

// ListenError classifies err, from listening on an address a flag gave
// (TCP or UDP): an address that does not parse or resolve is a usage
// error, any other failure (the address in use, or not this host's) a
// failed run, so that every daemon exits 1 for an address in use.
func ListenError(err error) error {
	if err == nil {
		return nil
	}
	var ae *net.AddrError
	var de *net.DNSError
	if errors.As(err, &ae) || errors.As(err, &de) {
		return apperr.Usage(err)
	}
	return apperr.Failed(err)
}

// CheckListenAddr is Listen's check of the address alone, for a daemon
// that checks its flags before it logs or starts anything.
func CheckListenAddr(flag, addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return apperr.Usage(fmt.Errorf("--%s %q: want HOST:PORT (%w)", flag, addr, err))
	}
	return nil
}
