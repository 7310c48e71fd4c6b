package vm

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/vmm/qemuproxy"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// servedGPU records what its GPU's Serve returned.
type servedGPU struct {
	GPU
	done chan error
}

func (g servedGPU) Serve(ctx context.Context, conn *qemuproxy.Conn) error {
	err := g.GPU.Serve(ctx, conn)
	g.done <- err
	return err
}

// levelCounter counts the log records at warning level or above.
type levelCounter struct {
	slog.Handler
	n *atomic.Int64
}

func (h levelCounter) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.n.Add(1)
	}
	return h.Handler.Handle(ctx, r)
}

func (h levelCounter) WithAttrs(as []slog.Attr) slog.Handler {
	return levelCounter{h.Handler.WithAttrs(as), h.n}
}

func (h levelCounter) WithGroup(name string) slog.Handler {
	return levelCounter{h.Handler.WithGroup(name), h.n}
}

// TestGuestKilledWhileCopying: QEMU is killed (SIGKILL) while the GPU
// writes a 64 MiB device-to-host copy into the guest's RAM. The GPU's
// Serve ends with ErrGuestDied naming the signal, Wait reports the same,
// the GPU side sees the pair go down, a warning or two are logged (not a
// flood), and Close leaves no QEMU and no temporary directory.
func TestGuestKilledWhileCopying(t *testing.T) {
	o := vmOptions(t)
	var warnings atomic.Int64
	o.Log = slog.New(levelCounter{o.Log.Handler(), &warnings})
	serial := o.Dir
	if err := os.Mkdir(serial, 0o700); err != nil { // only the serial log goes there
		t.Fatal(err)
	}
	o.Dir = "" // the VM's own temporary directory, which Close removes
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	remote, emu := lendPair(t, ctx, 4, o)
	served := servedGPU{remote, make(chan error, 1)}
	o.GPUs = []GPU{served}
	o.GuestArgs = []string{"--bytes", "67108864", "--timeout", "60s"}
	o.SerialLog = serial + "/serial.log" // kept for the failure report of vmOptions
	v, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	next := 0
	for {
		var ev GuestEvent
		if ev, next, err = v.WaitEvent(ctx, next, "copying"); err != nil {
			t.Fatal(err)
		}
		if ev.Data["dir"] == "d2h" {
			break
		}
	}
	ps, ss := remote.Stats()
	from := ps.DMAWrites.Load()
	waitfor.Progress(t, "the device-to-host copy's DMA writes", func() (bool, uint64) {
		n := ps.DMAWrites.Load()
		return n >= from+1024, n // 256 KiB of the 64 MiB at 256-byte writes
	})
	pid := v.cmd.Process.Pid
	// Counted from the kill: a loaded machine's late-timer warnings
	// before it are not the dead guest's.
	warnedBefore := warnings.Load()
	t0 := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var serveErr error
	waitfor.Until(t, "the GPU's Serve to return", func() bool {
		select {
		case serveErr = <-served.done:
			return true
		default:
			return false
		}
	})
	t.Logf("Serve returned %v after the kill: %v", time.Since(t0), serveErr)
	if !errors.Is(serveErr, ErrGuestDied) || !strings.Contains(serveErr.Error(), "killed") {
		t.Errorf("Serve returned %v, want ErrGuestDied naming the signal", serveErr)
	}
	if err := v.Wait(ctx); !errors.Is(err, ErrGuestDied) || !strings.Contains(err.Error(), "signal: killed") {
		t.Errorf("Wait returned %v, want ErrGuestDied naming the signal", err)
	}
	if ps.DMAWrites.Load() <= from || ps.DMAOutside.Load() != 0 {
		t.Errorf("DMA writes %d (from %d), refused %d", ps.DMAWrites.Load(), from, ps.DMAOutside.Load())
	}
	waitfor.Until(t, "the GPU side to see the pair go down", func() bool { return emu.r.State() != bridge.StateUp })
	t.Logf("GPU side %v %v after the kill; %d DMA writes served, %d TLPs dropped after the end",
		emu.r.State(), time.Since(t0), ps.DMAWrites.Load(), ss.DroppedAfterEnd.Load())

	dir := v.dir
	v.Close()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("QEMU (pid %d) after Close: %v, want no such process", pid, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the VM's directory %s after Close: %v", dir, err)
	}
	if n := warnings.Load() - warnedBefore; n > 3 {
		t.Errorf("%d warnings logged for one dead guest (%d before the kill)", n, warnedBefore)
	}
}
