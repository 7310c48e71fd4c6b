package nettlpside

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
)

// retryWait bounds one wait for the bridge to make room: Progress is one
// buffered signal shared by every sender, so a sender that missed it looks
// again after this long.
const retryWait = 200 * time.Microsecond

// sendWait hands one TLP to the runner, waiting while the bridge is full
// (ErrBusy) or still shaking hands (ErrNotUp), until it is taken, another
// error comes back, or ctx ends. A NetTLP port has nobody to push back
// to: the socket's receive buffer absorbs the stall.
func sendWait(ctx context.Context, r *driver.Runner, b []byte) error {
	var t *time.Timer
	for {
		err := r.Send(b)
		if err == nil || !(errors.Is(err, bridge.ErrBusy) || errors.Is(err, bridge.ErrNotUp)) {
			if t != nil {
				t.Stop()
			}
			return err
		}
		if t == nil {
			t = time.NewTimer(retryWait)
		} else {
			t.Reset(retryWait)
		}
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("nettlpside: TLP still refused when stopping: %w", err)
		case <-r.Progress:
		case <-t.C:
		}
	}
}
