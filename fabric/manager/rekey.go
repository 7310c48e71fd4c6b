package manager

import (
	"context"
	"fmt"

	"github.com/dxpu/dxpu/fabric/pool"
)

// Rekey gives every pair of an active allocation a fresh key, two-phase
// (changeKey): both bridges of a pair install the new generation, then
// both switch to it, as a lossless key change on the running bridges
// (bridge.Runner.InstallKey). If an end fails, the old key keeps working
// at both, the error is returned and the reconciler finishes the change.
// It is what `dxpu ctl rekey` calls; bridges also rekey on their own,
// under load, long before a key's nonce space runs low.
func (m *Manager) Rekey(ctx context.Context, id string) (pool.Allocation, error) {
	p, a, unclaim, err := m.claimAllocation(id, claimRekey)
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
	var first error
	for _, pr := range pairs {
		err := m.changeKey(ctx, pr, true)
		if err == nil {
			err = m.hotAddAfterKeyChange(ctx, pr)
		}
		if err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		m.log.Warn("rekey incomplete; the old key stays in use where the new one is not installed, the reconciler retries", "id", id, "err", first)
		return a, first
	}
	m.log.Info("rekeyed", "id", id, "pairs", len(pairs))
	return a, nil
}

// hotAddAfterKeyChange puts the pair's GPU on its host after a key change
// (idempotent where it is there). The change creates an end its agent lost
// (a host agent restarted and the rekey or re-apply came before the
// reconciler): without the hot-add the host runs the pair without its GPU
// for good while the allocation reads active (dxpu chaos, seed 2; seed 81
// with a VM host, whose guest was still booting when a re-apply's hot-add
// came). A failed hot-add leaves the change due, so that the reconciler
// retries it with the hot-add (finishKeyChanges): the end is listed, so
// restoring lost ends never would.
func (m *Manager) hotAddAfterKeyChange(ctx context.Context, pr Pair) error {
	if err := m.do(ctx, StepHotAdd, pr); err != nil {
		m.keys.setDue(pr.ID, true)
		return &StepError{Step: StepHotAdd, Pair: pr.ID, Err: err}
	}
	return nil
}
