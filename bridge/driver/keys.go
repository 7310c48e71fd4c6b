package driver

import (
	"github.com/dxpu/dxpu/bridge/seal"
)

// The key operations of a keyed bridge, under the runner's lock, for
// `dxpu ctl rekey` and the agent API that hands over the manager's new
// pair keys. Each returns bridge.ErrUnkeyed on an unkeyed bridge.

// Rekey moves both directions to a new key epoch, without loss.
func (r *Runner) Rekey() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.b.Rekey()
	r.flush()
	return err
}

// InstallKey adds pair key generation gen; see bridge.Bridge.InstallKey.
func (r *Runner) InstallKey(gen uint32, key []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.b.InstallKey(gen, key)
}

// ActivateKey seals under the newest generation from the next epoch on.
func (r *Runner) ActivateKey() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.b.ActivateKey()
	r.flush()
	return err
}

// KeyState returns the bridge's key state and whether it is keyed.
func (r *Runner) KeyState() (seal.State, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.b.KeyState()
}
