package manager

import (
	"context"
	"fmt"

	"github.com/dxpu/dxpu/fabric/pool"
)

// Rekey gives every pair of an active allocation a fresh key: both bridges
// of each pair are programmed again with the new key generation, which
// they install as a lossless key change (bridge.Runner.InstallKey). It is
// what `dxpu ctl rekey` calls; bridges also rekey on their own, under load,
// long before a key's nonce space runs low.
func (m *Manager) Rekey(ctx context.Context, id string) (pool.Allocation, error) {
	p, a, unclaim, err := m.claimAllocation(id)
	if err != nil {
		return pool.Allocation{}, err
	}
	defer unclaim()
	if a.State != pool.StateActive {
		return a, fmt.Errorf("%w: allocation %s is %s, not active", ErrBusy, id, a.State)
	}
	pairs, err := m.pairsOf(p, a)
	if err != nil {
		return a, err
	}
	for _, pr := range pairs {
		if err := m.cfg.GPUBridge.ProgramPair(ctx, pr); err != nil {
			return a, &StepError{Step: StepGPUBridge, Pair: pr.ID, Err: err}
		}
		if err := m.cfg.HostBridge.ProgramPair(ctx, pr); err != nil {
			return a, &StepError{Step: StepHostBridge, Pair: pr.ID, Err: err}
		}
	}
	m.log.Info("rekeyed", "id", id, "pairs", len(pairs))
	return a, nil
}
