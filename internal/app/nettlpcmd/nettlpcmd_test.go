package nettlpcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/tlp"
)

// TestServe runs the target and talks to it as libtlp would, then with
// Read and Write.
func TestServe(t *testing.T) {
	t.Parallel()
	// Addresses of this test alone, so no other test running at the same
	// time holds these ports.
	addr, local := netip.MustParseAddr("127.0.3.1"), netip.MustParseAddr("127.0.3.11")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var serveLog bytes.Buffer
	bound := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ServeOptions{Addr: addr.String(), Tags: 4, MemSize: "1M", Base: "0x10000",
			Fill: "pattern", MPS: 512, RCB: 128, Completer: "00:00.0", RcvBuf: "1M",
			Log: slog.New(slog.NewTextHandler(&serveLog, nil)), Ready: func() { close(bound) }})
	}()
	defer func() { // however the test ends, the target stops
		cancel()
		<-done
	}()
	select {
	case <-bound:
	case err := <-done:
		done <- err
		t.Fatalf("serve stopped before binding: %v", err)
	case <-ctx.Done():
		t.Fatalf("serve did not bind within the test's deadline")
	}

	c, err := nettlp.Dial(local, addr, 2, tlp.NewID(0x1b, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Timeout = 20 * time.Second
	got := make([]byte, 8)
	if _, err = c.Read(0x12345, got); err != nil {
		t.Fatalf("read from the served memory: %v", err)
	}
	for i := range got {
		if want := Pattern(0x12345 + uint64(i)); got[i] != want {
			t.Fatalf("byte %d = %#x, pattern says %#x", i, got[i], want)
		}
	}
	data := []byte("written by a libtlp-style client")
	if _, err := c.WriteAligned(0x20003, data, 16); err != nil {
		t.Fatal(err)
	}
	back := make([]byte, len(data))
	if _, err := c.ReadAligned(0x20003, back, 128); err != nil || !bytes.Equal(back, data) {
		t.Fatalf("read back %q, %v", back, err)
	}
	if _, err := c.Read(0x8000, back[:4]); !errors.Is(err, nettlp.ErrBadCompletion) {
		t.Fatalf("read below --base: %v, want a UR (bad completion to libtlp)", err)
	}

	// Read and Write against the same target.
	var out strings.Builder
	common := ClientOptions{Remote: addr.String(), Local: local.String(), Tag: 3, Requester: "1b:00.0", Timeout: 20 * time.Second, Stdout: &out}
	w := common
	w.Addr = "0x30001"
	if err := Write(WriteOptions{ClientOptions: w, Hex: "c0ffee"}); err != nil {
		t.Fatalf("write: %v", err)
	}
	r := common
	r.Addr = "0x30000"
	if err := Read(ReadOptions{ClientOptions: r, Size: 5}); err != nil {
		t.Fatalf("read: %v", err)
	}
	if want := fmt.Sprintf("%02x c0 ff ee %02x", Pattern(0x30000), Pattern(0x30004)); !strings.Contains(out.String(), want) {
		t.Fatalf("read printed %q, want %q in it", out.String(), want)
	}
	// More than one request moves is refused without --mrrs (it came
	// back as 4096 of 8192 bytes and exit 0), and read whole with it.
	out.Reset()
	if err := Read(ReadOptions{ClientOptions: r, Size: 8192}); !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), "use --mrrs") || out.Len() != 0 {
		t.Fatalf("read of 8 KiB in one request: %v, printed %q", err, out.String())
	}
	if err := Read(ReadOptions{ClientOptions: r, Size: 8192, MRRS: 4096}); err != nil || !strings.HasPrefix(out.String(), "read 8192 of 8192 bytes") {
		t.Fatalf("read of 8 KiB with --mrrs 4096: %v, printed %.40q", err, out.String())
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	done <- nil
}

// TestServeBadOptions: each bad option is a usage error before the target
// serves (under the deadline: a check that regresses fails here).
func TestServeBadOptions(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for name, bad := range map[string]func(*ServeOptions){
		"addr 0.0.0.0": func(o *ServeOptions) { o.Addr = "0.0.0.0" }, "addr nope": func(o *ServeOptions) { o.Addr = "nope" },
		"mps 100": func(o *ServeOptions) { o.MPS = 100 }, "rcb 32": func(o *ServeOptions) { o.RCB = 32 },
		"mem-size lots": func(o *ServeOptions) { o.MemSize = "lots" }, "fill random": func(o *ServeOptions) { o.Fill = "random" },
		"completer zz": func(o *ServeOptions) { o.Completer = "zz" }, "tags 17": func(o *ServeOptions) { o.Tags = 17 },
		"tags 0": func(o *ServeOptions) { o.Tags = 0 }, "mem-size 0": func(o *ServeOptions) { o.MemSize = "0" },
		"stats-every -1s": func(o *ServeOptions) { o.StatsEvery = -time.Second }, "rcvbuf -1": func(o *ServeOptions) { o.RcvBuf = "-1" },
	} {
		o := ServeOptions{Addr: "127.0.3.2", Tags: 16, MemSize: "1M", Base: "0", MPS: 256, RCB: 64, Fill: "zero",
			Completer: "00:00.0", RcvBuf: "1M", Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		bad(&o)
		if err := Serve(ctx, o); !errors.Is(err, apperr.ErrUsage) {
			t.Errorf("%s: %v, want a usage error", name, err)
		}
	}
}

// TestClientBadOptions: --mrrs and --mps are 0 or a power of two in
// 128..4096, as everywhere else, and --timeout is positive; each is a
// usage error naming the flag before anything is sent.
func TestClientBadOptions(t *testing.T) {
	t.Parallel()
	common := ClientOptions{Remote: "127.0.3.3", Local: "127.0.0.1", Requester: "00:00.0", Addr: "0", Timeout: time.Second, Stdout: io.Discard}
	noTimeout := common
	noTimeout.Timeout = 0
	for name, err := range map[string]error{
		"--mrrs 3":    Read(ReadOptions{ClientOptions: common, Size: 64, MRRS: 3}),
		"--mrrs 8192": Read(ReadOptions{ClientOptions: common, Size: 64, MRRS: 8192}),
		"--mps 100":   Write(WriteOptions{ClientOptions: common, String: "x", MPS: 100}),
		"--timeout 0": Read(ReadOptions{ClientOptions: noTimeout, Size: 4}),
	} {
		if !errors.Is(err, apperr.ErrUsage) || !strings.HasPrefix(err.Error(), name) {
			t.Errorf("%s: %v, want a usage error naming it", name, err)
		}
	}
}
