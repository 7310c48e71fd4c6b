package httpguard

import (
	"errors"
	"fmt"
	"net"

	"github.com/dxpu/dxpu/internal/app/apperr"
)

// Listen listens on TCP addr, given to a daemon as --flag: an address
// that is not HOST:PORT is a usage error naming the flag (it was a failed
// run, exit 1, as a port in use is), a failure to bind is not.
func Listen(flag, addr string) (net.Listener, error) {
	if err := CheckListenAddr(flag, addr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		var ae *net.AddrError
		var de *net.DNSError
		if errors.As(err, &ae) || errors.As(err, &de) {
			return nil, apperr.Usage(fmt.Errorf("--%s %q: %w", flag, addr, err))
		}
		return nil, fmt.Errorf("--%s %q: %w", flag, addr, err)
	}
	return ln, nil
}

// CheckListenAddr is Listen's check of the address alone, for a daemon
// that checks its flags before it logs or starts anything.
func CheckListenAddr(flag, addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return apperr.Usage(fmt.Errorf("--%s %q: want HOST:PORT (%w)", flag, addr, err))
	}
	return nil
}
