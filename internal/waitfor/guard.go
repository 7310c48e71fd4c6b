//go:build linux

package waitfor

import (
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
)

// GroupGuard kills process groups when the process holding it dies,
// however it dies: a test binary killed by a signal or its -timeout runs
// no cleanup, and the daemons a shell block left in the background (a
// QEMU guest, bridges holding ports) get no parent-death signal of their
// own, their parent being the shell that already exited.
//
// The guard is a bash reading the groups from a pipe whose write end only
// this process holds (close-on-exec): when this process ends, the kernel
// closes it, bash reads end of file and kills the groups still listed. A
// group is listed from Add until Kill or Forget: an owner forgets a group
// that ended by itself, so that its ID, once the kernel reuses it, never
// names another's group.
type GroupGuard struct {
	mu  sync.Mutex
	cmd *exec.Cmd
	w   io.WriteCloser
}

// guardScript keeps the set of groups in an associative array: "+ ID"
// adds, "- ID" removes; at end of input it kills what is left.
const guardScript = `declare -A g
while read -r op id; do
	case $op in
	+) g[$id]=1 ;;
	-) unset "g[$id]" ;;
	esac
done
for id in "${!g[@]}"; do kill -KILL -- "-$id" 2>/dev/null; done`

// NewGroupGuard starts a guard (in a process group of its own, so that
// no group it kills is its own).
func NewGroupGuard() (*GroupGuard, error) {
	cmd := exec.Command("bash", "-c", guardScript)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("waitfor: group guard: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("waitfor: group guard: %w", err)
	}
	return &GroupGuard{cmd: cmd, w: w}, nil
}

func (g *GroupGuard) send(op byte, pgid int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, err := fmt.Fprintf(g.w, "%c %d\n", op, pgid); err != nil {
		return fmt.Errorf("waitfor: group guard: %w", err)
	}
	return nil
}

// Add lists process group pgid: it dies with this process.
func (g *GroupGuard) Add(pgid int) error { return g.send('+', pgid) }

// Forget unlists pgid (a group that ended by itself).
func (g *GroupGuard) Forget(pgid int) error { return g.send('-', pgid) }

// Kill kills process group pgid and unlists it.
func (g *GroupGuard) Kill(pgid int) error {
	err := syscall.Kill(-pgid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		err = nil // already gone
	}
	return errors.Join(err, g.Forget(pgid))
}

// Close kills the groups still listed, as this process's end would, and
// waits for the guard to exit.
func (g *GroupGuard) Close() error {
	g.mu.Lock()
	err := g.w.Close()
	g.mu.Unlock()
	return errors.Join(err, g.cmd.Wait())
}
