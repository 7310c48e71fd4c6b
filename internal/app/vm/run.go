package vm

import (
	"context"
	"fmt"
	"time"

	"github.com/dxpu/dxpu/internal/guest"
)

// Run boots a guest with o's GPUs, waits for the guest tool's report and
// for the guest to power off (then QMP quit, then a kill), and cleans up:
// `dxpu vm run`. With o.StayUp the guest is shut down once it reported. A failure of the tool is in the report's Error and
// the returned error.
func Run(ctx context.Context, o Options, powerOffWait time.Duration) (guest.Report, Timing, error) {
	v, err := Start(ctx, o)
	if err != nil {
		return guest.Report{}, Timing{}, err
	}
	defer v.Close()
	rep, tm, err := v.Result(ctx)
	if err != nil {
		return rep, tm, err
	}
	if !o.StayUp { // the guest powers itself off after the report
		wctx, cancel := context.WithTimeout(ctx, powerOffWait)
		_ = v.Wait(wctx)
		cancel()
	}
	if err := v.Shutdown(ctx, 10*time.Second); err != nil {
		return rep, tm, err
	}
	if rep.Error != "" {
		return rep, tm, fmt.Errorf("vm: the guest tool failed: %s", rep.Error)
	}
	return rep, tm, nil
}
