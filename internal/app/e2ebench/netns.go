package e2ebench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
)

// ErrNamespaces is returned when namespace mode cannot run.
var ErrNamespaces = errors.New("e2ebench: namespace mode")

// newNamespaces would build host | XDP switch | GPU namespaces; not
// written yet: Run says so instead of measuring something else.
func newNamespaces(ctx context.Context, log *slog.Logger) (network, error) {
	return nil, fmt.Errorf("%w: not implemented yet; run with Loopback", ErrNamespaces)
}
