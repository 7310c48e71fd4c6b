package vm

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// TestHostLost: Lost says why a host guest can take no more GPUs: its tool
// exited (with the status it printed), or QEMU's console closed with QEMU
// dead; a context that ends first is no loss.
func TestHostLost(t *testing.T) {
	t.Parallel()
	newHost := func() (*Host, *io.PipeWriter) {
		r, w := io.Pipe()
		v := &VM{o: Options{SerialLog: "/tmp/serial.log"}, exited: make(chan struct{}), con: newConsole(time.Now())}
		go v.con.follow(r, io.Discard)
		life, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		return &Host{v: v, life: life, cancel: cancel}, w
	}

	// The tool exits: its status is the reason.
	h, w := newHost()
	lost := make(chan error, 1)
	go func() { lost <- h.Lost(context.Background()) }()
	io.WriteString(w, "dxpu-guest: guest: read /sys/bus/pci/devices/0000:01:00.0/device: no such device\nDXPU-EXIT 1\n")
	err := <-lost
	if !errors.Is(err, ErrHostLost) || !strings.Contains(err.Error(), "its tool exited with status 1 (serial log /tmp/serial.log)") {
		t.Fatalf("the tool exited: %v", err)
	}
	w.Close()

	// QEMU dies: the console closes and Wait's error names how.
	h, w = newHost()
	go func() { lost <- h.Lost(context.Background()) }()
	h.v.died = ErrGuestDied
	close(h.v.exited)
	w.Close()
	if err := <-lost; !errors.Is(err, ErrHostLost) || !errors.Is(err, ErrGuestDied) {
		t.Fatalf("QEMU died: %v", err)
	}

	// The owner's context ends first: no loss reported.
	h, w = newHost()
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { lost <- h.Lost(ctx) }()
	cancel()
	if err := <-lost; !errors.Is(err, context.Canceled) || errors.Is(err, ErrHostLost) {
		t.Fatalf("the context ended: %v", err)
	}
}
