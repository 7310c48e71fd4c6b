package bridged

import (
	"context"
	"errors"
	"sync"

	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/bridge/nettlpside"
	"github.com/dxpu/dxpu/tlp"
)

// doorbell puts the test target (docs/protocol.md, 12.1) at addr of the
// memory device: it looks at every TLP delivered before the device does,
// and a goroutine hands the requests a command asks for to the runner, in
// order, waiting while the bridge refuses them (tags, credits), never
// dropping one. It returns the device's run function with the issuer's.
func (d *Daemon) doorbell(addr uint64, o *Options, mem nettlp.Memory) (func(context.Context) error, error) {
	db := nettlpside.NewDoorbell(addr, tlp.NewID(3, 0, 0), func(a uint64, b []byte) {
		if err := mem.WriteAt(b, a); err != nil {
			o.Log.Warn("doorbell status not stored", "addr", a, "err", err)
		}
	})
	reqs := make(chan []byte, 4*nettlpside.DoorbellMaxCount)
	deliver := d.runner.OnTLP // the memory device
	// OnTLP runs with the runner's lock held and must not send: the
	// requests go to the issuer. A command arrives only after the previous
	// one's requests were taken (the peer waits for them), so the channel
	// never fills; if it did, the request is reported rather than dropped
	// silently.
	d.runner.OnTLP = func(v tlp.View) {
		issue, consumed := db.Take(v)
		for _, r := range issue {
			select {
			case reqs <- r:
			default:
				o.Log.Error("doorbell: request queue full, request not issued")
			}
		}
		if !consumed {
			deliver(v)
		}
	}
	run := func(ctx context.Context) error {
		var wg sync.WaitGroup
		var issueErr error
		wg.Go(func() {
			for {
				select {
				case r := <-reqs:
					if err := driver.SendWait(ctx, d.runner, r); err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
						issueErr = err
						return
					}
				case <-ctx.Done():
					return
				}
			}
		})
		err := d.mem.Run(ctx)
		wg.Wait()
		return errors.Join(err, issueErr)
	}
	return run, nil
}
