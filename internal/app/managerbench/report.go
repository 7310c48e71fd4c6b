package managerbench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/dxpu/dxpu/internal/app/apperr"
)

// WriteReport runs the measurement and prints it to w: text, or one JSON
// object with asJSON. Bad options are apperr.ErrUsage; a run that could
// not finish prints nothing and is the error; broken invariants print the
// result and are apperr.ErrFailed.
func WriteReport(ctx context.Context, o Options, asJSON bool, w io.Writer) error {
	if err := o.defaults(); err != nil {
		return apperr.Usage(err)
	}
	r, err := Run(ctx, o)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else {
		writeText(w, r)
	}
	if !r.InvariantsHold {
		return apperr.Failed(fmt.Errorf("bench manager: invariants broken: over-allocated %d, agent conflicts %d, counts add up %v, errors %d, "+
			"GPUs used %d before the restart (%d freed for it) and %d after", r.OverAllocated, r.AgentConflicts, r.CountsAddUp, r.Errors, r.GPUsUsed, r.RestartFreedGPUs, r.RestartGPUsUsed))
	}
	return nil
}

func writeText(w io.Writer, r Result) {
	fmt.Fprintf(w, "store %s: %d GPUs in %d boxes, %d hosts, %d clients for %.2f s\n", r.Store, r.GPUs, r.Boxes, r.Hosts, r.Clients, r.Seconds)
	fmt.Fprintf(w, "allocations %d (%.0f/s), releases %d (%.0f ops/s together), refused %d, errors %d\n",
		r.Allocations, r.AllocsPerSecond, r.Releases, r.OpsPerSecond, r.Refused, r.Errors)
	if r.FirstError != "" {
		fmt.Fprintf(w, "first error: %s\n", r.FirstError)
	}
	fmt.Fprintf(w, "allocate latency us: p50 %.0f p99 %.0f max %.0f; release: p50 %.0f p99 %.0f max %.0f\n",
		r.AllocLatency.P50Us, r.AllocLatency.P99Us, r.AllocLatency.MaxUs, r.ReleaseLatency.P50Us, r.ReleaseLatency.P99Us, r.ReleaseLatency.MaxUs)
	fmt.Fprintf(w, "over-allocated %d, agent conflicts %d; at the end: GPUs held %d, lent %d, paired %d; allocations held %d, live %d (add up: %v); peak held %d\n",
		r.OverAllocated, r.AgentConflicts, r.GPUsHeld, r.GPUsUsed, r.GPUsPaired, r.AllocationsHeld, r.AllocationsLive, r.CountsAddUp, r.PeakGPUsHeld)
	fmt.Fprintf(w, "restart (store reopened, manager to its first allocation): %.1f ms, %d GPUs lent after it (%d freed before it for room)\n", r.RestartMs, r.RestartGPUsUsed, r.RestartFreedGPUs)
}
