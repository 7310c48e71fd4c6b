package vm

import (
	"errors"
	"fmt"
)

// ErrGuestDied is QEMU ending by itself other than cleanly: killed by a
// signal, crashed, or exited with an error status. A guest that powers
// off, or a QEMU this VM stops, is no death.
var ErrGuestDied = errors.New("vm: the guest died")

// exitedWith records how QEMU ended (err from its Wait) and tells the
// GPUs lent to it. QEMU's death closes its ends of the proxy sockets the
// same way a clean exit does, so each lending holds a copy of QEMU's end:
// the server sees the close only here, after its context was cancelled
// with the death as cause when the guest died, and reports that instead
// of a clean close.
func (v *VM) exitedWith(err error) {
	if err != nil && !v.stopping.Load() {
		v.died = fmt.Errorf("%w (QEMU: %w)", ErrGuestDied, err)
	}
	v.mu.Lock()
	ls := make([]*lending, 0, len(v.lent))
	for _, l := range v.lent {
		ls = append(ls, l)
	}
	v.mu.Unlock()
	for _, l := range ls {
		if v.died != nil {
			l.cancel(v.died)
		}
		l.releaseQEMUEnd()
	}
}

// releaseQEMUEnd closes the lending's copy of QEMU's end of the socket.
func (l *lending) releaseQEMUEnd() {
	l.endOnce.Do(func() {
		if l.qemuEnd != nil {
			_ = l.qemuEnd.Close()
		}
	})
}
