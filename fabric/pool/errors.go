package pool

import (
	"errors"
	"fmt"
)

// Sentinel errors; every error the pool returns wraps one of them.
var (
	ErrNotFound     = errors.New("not found")
	ErrExists       = errors.New("already exists")
	ErrInvalid      = errors.New("invalid argument")
	ErrInsufficient = errors.New("not enough free GPUs")
	ErrNoHostPorts  = errors.New("not enough free virtual ports on host")
	ErrInUse        = errors.New("in use")
	ErrConflict     = errors.New("conflict")
	ErrNoPairIDs    = errors.New("pair IDs exhausted")
	// ErrDuplicate comes with the existing allocation of a RequestID.
	ErrDuplicate = errors.New("request already allocated")
)

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}
