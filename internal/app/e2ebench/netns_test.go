package e2ebench

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/privtest"
)

// recorder is a slog handler that keeps the "switch forwarded" records.
type recorder struct {
	mu    sync.Mutex
	flows map[uint64]map[string]uint64 // pair -> attribute -> value
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message != "e2ebench: switch forwarded" {
		return nil
	}
	attrs := map[string]uint64{}
	rec.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.Resolve().Uint64()
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.flows == nil {
		r.flows = map[uint64]map[string]uint64{}
	}
	r.flows[attrs["pair"]] = attrs
	return nil
}

// heldFDs counts the process's descriptors of network namespaces and BPF
// objects (programs, maps, links), by kind.
func heldFDs(t *testing.T) map[string]int {
	t.Helper()
	fds, err := filepath.Glob("/proc/self/fd/*")
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]int{}
	for _, fd := range fds {
		l, err := os.Readlink(fd)
		switch {
		case err != nil:
		case strings.HasPrefix(l, "net:["):
			held["netns"]++
		case strings.HasPrefix(l, "anon_inode:bpf"):
			held[strings.TrimPrefix(l, "anon_inode:")]++
		}
	}
	return held
}

// TestNamespaces runs namespace mode with small sizes: host side, XDP
// switch and GPU side each in its own namespace. The figures are sane, the
// fabric costs at least the echo on the same path, the switch's counters
// show the echo and the copies crossed it (every echo each way, at least
// the copied bytes each way), and no namespace or BPF object of the
// network is left held. Not parallel: it counts the process's descriptors.
func TestNamespaces(t *testing.T) {
	privtest.NetNS(t)
	privtest.BPF(t)
	sizes := []uint64{64 << 10, 256 << 10}
	const samples, copies = 200, 2
	rec := &recorder{}
	before := heldFDs(t)
	r, err := Run(context.Background(), Options{Sizes: sizes, Samples: samples, Copies: copies, LinkFor: 200 * time.Millisecond, Log: slog.New(rec)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", r)
	if r.Mode != "netns" || r.MTU != nsMaxMTU {
		t.Errorf("mode %q, MTU %d: want netns, %d", r.Mode, r.MTU, nsMaxMTU)
	}
	checkFigures(t, r, sizes)
	// An MMIO read crosses the same path as the echo, there and back, plus
	// the bridges and the GPU's answer. Both move with the machine's load
	// (they are timed apart, and the bridges busy-poll), so the check is
	// the one a read served without crossing the switch would fail: well
	// under the echo.
	if r.MMIOReadP50Us < r.EchoP50Us/2 {
		t.Errorf("MMIO read p50 %vus, the echo's p50 %vus on the same path: the read did not cross it", r.MMIOReadP50Us, r.EchoP50Us)
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	echo, bridges := rec.flows[echoPair], rec.flows[pairID]
	if echo == nil || bridges == nil {
		t.Fatalf("no switch counters logged for pairs %d and %d: %v", pairID, echoPair, rec.flows)
	}
	t.Logf("switch: bridges %v, echo %v", bridges, echo)
	// Two echo series (plain and busy-polling sockets), samples each,
	// and the plain echo's untimed warm-up turns.
	if want := uint64(2*samples + warmUp); echo["to_gpu_frames"] != want || echo["to_host_frames"] != want {
		t.Errorf("switch forwarded %d echoes to the GPU and %d back, want %d each", echo["to_gpu_frames"], echo["to_host_frames"], want)
	}
	var copied uint64
	for _, s := range sizes {
		copied += s * copies
	}
	// Device-to-host data crosses GPU to host (the copy engine's writes),
	// host-to-device data host to GPU (completions of its reads).
	if bridges["to_host_bytes"] < copied || bridges["to_gpu_bytes"] < copied {
		t.Errorf("switch forwarded %d bytes of pair %d to the host and %d to the GPU; the copies moved %d each way",
			bridges["to_host_bytes"], pairID, bridges["to_gpu_bytes"], copied)
	}
	if after := heldFDs(t); !maps.Equal(after, before) {
		t.Errorf("the process holds %v namespace and BPF descriptors after the run, %v before", after, before)
	}
}

// TestNamespacesRefused: without root, namespace mode says to use
// --loopback; a bridge MTU the veths cannot carry is refused.
func TestNamespacesRefused(t *testing.T) {
	t.Parallel()
	err := requireRoot(1000)
	if !errors.Is(err, ErrNamespaces) || !strings.Contains(err.Error(), "--loopback") {
		t.Errorf("as euid 1000: %v, want ErrNamespaces naming --loopback", err)
	}
	if err := requireRoot(0); err != nil {
		t.Errorf("as root: %v", err)
	}
	_, err = Run(context.Background(), Options{MTU: nsMaxMTU + 1})
	if !errors.Is(err, ErrNamespaces) {
		t.Fatalf("MTU %d in namespace mode: %v, want ErrNamespaces", nsMaxMTU+1, err)
	}
	if os.Geteuid() == 0 && !strings.Contains(err.Error(), "at most 1472") {
		t.Errorf("MTU %d: %v, want the limit named", nsMaxMTU+1, err)
	}
}
