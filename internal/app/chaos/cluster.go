package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dxpu/dxpu/internal/app/childproc"
	"github.com/dxpu/dxpu/internal/netns"
)

// proc is one daemon of the cluster: the dxpu binary with fixed
// arguments, started again after a kill or restart with the same ones.
type proc struct {
	name string
	bin  string
	args []string
	log  string    // stdout and stderr, appended across restarts
	ns   *netns.NS // where it runs; nil: here

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	// Started from a thread inside its namespace, the child is born there
	// (and the PID signalled is dxpu's own); it dies with the campaign.
	var enter func() error
	if p.ns != nil {
		enter = p.ns.Enter
	}
	if err := childproc.Start(cmd, enter); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	exited := make(chan struct{})
	go func() {
		// Its end in its log: a daemon that died on its own shows why.
		err := cmd.Wait()
		fmt.Fprintf(f, "chaos: %s (pid %d) exited: %v\n", p.name, cmd.Process.Pid, err)
		f.Close()
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited
	return nil
}

func (p *proc) signal(s syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return fmt.Errorf("%s is not running", p.name)
	}
	return p.cmd.Process.Signal(s)
}

// wait waits for the running process to exit, up to d; false if it did
// not.
func (p *proc) wait(d time.Duration) bool {
	p.mu.Lock()
	ch := p.exited
	p.mu.Unlock()
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// kill ends the process for good (a stopped one too).
func (p *proc) kill() {
	_ = p.signal(syscall.SIGKILL)
	p.wait(5 * time.Second)
}

// cable is a box's network cable, in the campaign's process: the box's
// agent sends to it and it is the box's registered endpoint, so every
// frame of the box crosses it. The UDP switch has no way to cut one port,
// so the nemesis cuts the cable instead: it drops every frame both ways.
// A lossy cable drops each frame with probability lossPPM per million.
type cable struct {
	conn    *net.UDPConn
	box     *net.UDPAddr // the box agent's data plane
	sw      *net.UDPAddr // the switch
	cut     atomic.Bool
	lossPPM atomic.Uint32
	rng     *rand.PCG     // the run goroutine's alone
	frames  atomic.Uint64 // forwarded
	dropped atomic.Uint64 // while cut
	lost    atomic.Uint64 // to loss
}

func newCable(listen, box, sw string) (*cable, error) {
	la, err := net.ResolveUDPAddr("udp", listen)
	if err != nil {
		return nil, err
	}
	c := &cable{rng: rand.NewPCG(uint64(la.Port), 1)}
	if c.box, err = net.ResolveUDPAddr("udp", box); err != nil {
		return nil, err
	}
	if c.sw, err = net.ResolveUDPAddr("udp", sw); err != nil {
		return nil, err
	}
	if c.conn, err = net.ListenUDP("udp", la); err != nil {
		return nil, fmt.Errorf("cable %s: %w", listen, err)
	}
	return c, nil
}

func (c *cable) run(ctx context.Context) {
	go func() { <-ctx.Done(); c.conn.Close() }()
	buf := make([]byte, 65536)
	for {
		n, from, err := c.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if c.cut.Load() {
			c.dropped.Add(1)
			continue
		}
		if p := c.lossPPM.Load(); p > 0 && c.rng.Uint64()%1_000_000 < uint64(p) {
			c.lost.Add(1)
			continue
		}
		to := c.box
		if from.Port() == uint16(c.box.Port) && from.Addr().Unmap() == c.box.AddrPort().Addr().Unmap() {
			to = c.sw
		}
		c.frames.Add(1)
		_, _ = c.conn.WriteToUDP(buf[:n], to)
	}
}
