//go:build !linux

package switching

import (
	"context"

	"github.com/dxpu/dxpu/bridge/ratelog"
)

// run is the portable loop where there are no recvmmsg and sendmmsg.
func (d *UDPDriver) run(ctx context.Context, lim *ratelog.Limiter) error {
	return d.runPerDatagram(ctx, lim)
}
