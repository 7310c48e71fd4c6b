package e2ebench

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/app/apperr"
)

// TestLoopback runs the whole measurement on loopback with small sizes and
// checks that every figure is there and sane: positive, ordered
// percentiles, a rate for every size each way, and the JSON keys the
// command prints.
func TestLoopback(t *testing.T) {
	sizes := []uint64{256 << 10, 64 << 10} // not sorted: copies keep this order
	r, err := Run(context.Background(), Options{Loopback: true, Sizes: sizes, Samples: 200, Copies: 1, LinkFor: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", r)
	if r.Mode != "loopback" {
		t.Errorf("mode %q, want loopback", r.Mode)
	}
	checkFigures(t, r, sizes)
	if r.TCPGoodputGbps <= 0 || r.Ratios.PairOverTCP <= 0 {
		t.Errorf("loopback: TCP %v Gbit/s, pair over it %v: want both positive", r.TCPGoodputGbps, r.Ratios.PairOverTCP)
	}
}

// checkFigures checks what every mode reports: each figure there and sane,
// and the JSON keys the command prints.
func checkFigures(t *testing.T, r Result, sizes []uint64) {
	t.Helper()
	for name, v := range map[string][2]float64{
		"echo": {r.EchoP50Us, r.EchoP99Us}, "busy-poll echo": {r.EchoBusyPollP50Us, r.EchoBusyPollP99Us},
		"mmio": {r.MMIOReadP50Us, r.MMIOReadP99Us}, "dma": {r.DMAReadP50Us, r.DMAReadP99Us},
	} {
		if v[0] <= 0 || v[1] < v[0] {
			t.Errorf("%s: p50 %vus p99 %vus: want 0 < p50 <= p99", name, v[0], v[1])
		}
	}
	// Over the bridge pair an MMIO read costs at least a network round
	// trip more than on native PCIe.
	if r.MMIOReadP50Us <= r.NativeMMIOReadUs {
		t.Errorf("MMIO read %vus over the bridges, %vus native: the fabric costs nothing?", r.MMIOReadP50Us, r.NativeMMIOReadUs)
	}
	if r.LaunchSyncUs <= 0 || r.NativeLaunchSyncUs <= 0 || r.LaunchSyncUs <= r.NativeLaunchSyncUs {
		t.Errorf("launch+sync %vus, native %vus: want 0 < native < fabric", r.LaunchSyncUs, r.NativeLaunchSyncUs)
	}
	// With the commands in host memory the GPU fetches them across the
	// fabric: two round trips more than from its own memory (launches of
	// both placements take turns, so both see the same machine).
	if r.NativeLaunchSyncHostCmdsUs <= 0 || r.LaunchSyncHostCmdsUs <= r.LaunchSyncUs {
		t.Errorf("launch+sync with host-memory commands %vus (native %vus), with device-memory commands %vus: want host > device",
			r.LaunchSyncHostCmdsUs, r.NativeLaunchSyncHostCmdsUs, r.LaunchSyncUs)
	}
	if len(r.Copies) != len(sizes) {
		t.Errorf("%d copies for %d sizes: %+v", len(r.Copies), len(sizes), r.Copies)
	}
	for i, c := range r.Copies {
		if i < len(sizes) && c.SizeBytes != sizes[i] || !(c.H2DGbps > 0) || !(c.D2HGbps > 0) {
			t.Errorf("copy %d: %+v: want size %d (the order of the sizes) and both rates", i, c, sizes[min(i, len(sizes)-1)])
		}
	}
	if r.LinkGoodputGbps <= 0 || r.CPUSecondsPerGB <= 0 {
		t.Errorf("link goodput %v Gbit/s, CPU %v s/GB: want both positive", r.LinkGoodputGbps, r.CPUSecondsPerGB)
	}
	// The raw UDP baseline: datagrams of the bridges' MTU, some arrived,
	// none counted twice, and the ratios against it filled in.
	if r.UDPGoodputGbps <= 0 || r.UDPDatagramBytes != r.MTU || r.UDPReceived == 0 || r.UDPReceived > r.UDPSent ||
		r.Ratios.PairOverUDP <= 0 || r.Ratios.H2DOverUDP <= 0 || r.Ratios.D2HOverUDP <= 0 ||
		r.LinkFrameBytes <= 0 || r.LinkFrameBytes > r.MTU || r.UDPSameFramesGbps <= 0 || r.Ratios.PairOverUDPSameFrames <= 0 {
		t.Errorf("raw UDP %v Gbit/s (%d-byte datagrams, %d of %d arrived), at the link's %d-byte frames %v Gbit/s, ratios %+v",
			r.UDPGoodputGbps, r.UDPDatagramBytes, r.UDPReceived, r.UDPSent, r.LinkFrameBytes, r.UDPSameFramesGbps, r.Ratios)
	}
	// Two MTU floods bracket the copies; the figure is their mean.
	if r.UDPBeforeGbps <= 0 || r.UDPAfterGbps <= 0 || r.UDPGoodputGbps != (r.UDPBeforeGbps+r.UDPAfterGbps)/2 ||
		r.UDPDrift != max(r.UDPBeforeGbps, r.UDPAfterGbps)/min(r.UDPBeforeGbps, r.UDPAfterGbps) ||
		r.Ratios.H2DOverUDP != r.Copies[slices.Index(sizes, slices.Max(sizes))].H2DGbps/r.UDPGoodputGbps {
		t.Errorf("UDP before %v, after %v, mean %v, drift %v, H2D over UDP %v", r.UDPBeforeGbps, r.UDPAfterGbps, r.UDPGoodputGbps,
			r.UDPDrift, r.Ratios.H2DOverUDP)
	}
	if r.Ratios.H2DOverLink <= 0 || r.Ratios.MMIOP50OverEcho <= 0 {
		t.Errorf("ratios not filled in: %+v", r.Ratios)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]any
	if err := json.Unmarshal(b, &keys); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"echo_p50_us", "echo_p99_us", "mmio_read_p50_us", "mmio_read_p99_us", "dma_read_p50_us",
		"launch_sync_us", "native_launch_sync_us", "launch_sync_host_cmds_us", "native_launch_sync_host_cmds_us", "copies", "link_goodput_gbps", "cpu_s_per_gb",
		"udp_goodput_gbps", "udp_datagram_bytes", "link_frame_bytes", "udp_same_frames_goodput_gbps",
		"udp_before_gbps", "udp_after_gbps", "udp_drift_ratio"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	for _, k := range []string{"pair_over_udp", "h2d_largest_over_udp", "d2h_largest_over_udp", "pair_over_udp_same_frames"} {
		if _, ok := keys["ratios"].(map[string]any)[k]; !ok {
			t.Errorf("JSON ratios lack %q", k)
		}
	}
	// Copies are an array in the order of the sizes, each with its size
	// and rates under keys with their units (they were objects keyed by
	// byte counts: {"65536": 1.2}).
	copies, _ := keys["copies"].([]any)
	if len(copies) != len(sizes) {
		t.Fatalf("copies %v: want one per size", keys["copies"])
	}
	for i, c := range copies {
		m, _ := c.(map[string]any)
		if len(m) != 3 || m["size_bytes"] != float64(sizes[i]) || m["h2d_gbps"] == nil || m["d2h_gbps"] == nil {
			t.Errorf("copies[%d] %v: want size_bytes %d, h2d_gbps and d2h_gbps", i, c, sizes[i])
		}
	}
	for _, k := range []string{"h2d_gbps", "d2h_gbps"} {
		if _, ok := keys[k]; ok {
			t.Errorf("JSON has %q beside copies", k)
		}
	}
}

func TestOptionsRejected(t *testing.T) {
	t.Parallel()
	for _, o := range []Options{
		{Loopback: true, Sizes: []uint64{3}},
		{Loopback: true, Samples: 2},
		{Loopback: true, Copies: -1},
		{Loopback: true, MTU: 100},
	} {
		if _, err := Run(context.Background(), o); !errors.Is(err, apperr.ErrUsage) {
			t.Errorf("%+v: %v, want a usage error (exit status 2)", o, err)
		}
	}
	// Durations named as `dxpu help units` spells them: -5us, not -5µs.
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Loopback: true, Spin: -5 * time.Microsecond}, "--spin -5us: want a positive duration"},
		{Options{Loopback: true, LinkFor: -7 * time.Microsecond}, "--link-for -7us: want a positive duration"},
	} {
		if _, err := Run(context.Background(), c.o); !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want a usage error with %q", c.o, err, c.want)
		}
	}
}

// TestRunFailureIsNotUsage: a run that was set up and then failed is a
// failed run (exit status 1), not a usage error: here the first phase's
// CPU profile cannot be created (a directory holds its name).
func TestRunFailureIsNotUsage(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "latency.cpu.pprof"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Run(context.Background(), Options{Loopback: true, Sizes: []uint64{4096}, Samples: 20, Copies: 1,
		LinkFor: 10 * time.Millisecond, ProfileDir: dir})
	if !errors.Is(err, apperr.ErrFailed) || errors.Is(err, apperr.ErrUsage) {
		t.Fatalf("got %v (failed %v, usage %v); want a failed run", err, errors.Is(err, apperr.ErrFailed), errors.Is(err, apperr.ErrUsage))
	}
}
