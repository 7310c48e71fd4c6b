package driver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dxpu/dxpu/bridge"
)

// retryWait bounds one wait for the bridge to make room: Progress is one
// buffered signal shared by every sender, so a sender that missed it looks
// again after this long.
const retryWait = 200 * time.Microsecond

// SendWait hands one TLP to the runner, waiting while the bridge is full
// (ErrBusy) or still shaking hands (ErrNotUp), until it is taken, another
// error comes back, or ctx ends. It is for PCIe sides with nobody to push
// back to (a NetTLP port, a device model): the socket's receive buffer or
// the model's queue absorbs the stall.
func SendWait(ctx context.Context, r *Runner, b []byte) error {
	return wait(ctx, r, func() error { return r.Send(b) })
}

// SendManyWait is SendWait for several TLPs handed over together
// (SendMany: framed together where they fit), in order; those taken
// before a refusal are not sent again.
func SendManyWait(ctx context.Context, r *Runner, tlps [][]byte) error {
	return wait(ctx, r, func() error {
		n, err := r.SendMany(tlps)
		tlps = tlps[n:]
		return err
	})
}

// wait calls send until it succeeds or fails otherwise than for want of
// room or of the link, sleeping on the runner's progress in between.
func wait(ctx context.Context, r *Runner, send func() error) error {
	var t *time.Timer
	for {
		err := send()
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
			return fmt.Errorf("driver: TLP still refused when stopping: %w", err)
		case <-r.Progress:
		case <-t.C:
		}
	}
}
