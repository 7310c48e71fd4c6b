package e2ebench

import (
	"context"
	"errors"
	"log/slog"
)

// ErrNamespaces is returned when namespace mode cannot run here.
var ErrNamespaces = errors.New("e2ebench: namespace mode")

func newNamespaces(ctx context.Context, log *slog.Logger) (network, error) {
	return nil, errors.ErrUnsupported
}
