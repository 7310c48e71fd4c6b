package e2ebench

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/dxpu/dxpu/internal/app/bytesize"
	"github.com/dxpu/dxpu/internal/app/rawgoodput"
)

// WriteText prints r for a reader: latencies, copies by size (smallest
// first, whatever the order of --sizes), the link and the ratios
// beside their targets. Times in us, rates in Gbit/s (dxpu help units).
func (r Result) WriteText(w io.Writer) error {
	sides := "host and GPU on clocks of their own"
	if r.Clocks == 1 {
		sides = "host and GPU on one clock"
	}
	fmt.Fprintf(w, "bench e2e: %s, MTU %d bytes, %s; times in us, rates in Gbit/s\n\n", r.Mode, r.MTU, sides)
	row := func(label, a, b string) {
		fmt.Fprintln(w, strings.TrimRight(fmt.Sprintf("  %-42s %11s %11s", label, a, b), " "))
	}
	us := func(v float64) string { return fmt.Sprintf("%.1f", v) }
	row("latency", "p50 us", "p99 us")
	row("UDP echo (baseline)", us(r.EchoP50Us), us(r.EchoP99Us))
	row("UDP echo, busy poll", us(r.EchoBusyPollP50Us), us(r.EchoBusyPollP99Us))
	row("MMIO read", us(r.MMIOReadP50Us), us(r.MMIOReadP99Us))
	row("DMA read", us(r.DMAReadP50Us), us(r.DMAReadP99Us))
	fmt.Fprintln(w)
	row("p50 over the fabric and native", "fabric us", "native us")
	row("MMIO read", us(r.MMIOReadP50Us), us(r.NativeMMIOReadUs))
	row("launch+sync, commands in VRAM", us(r.LaunchSyncUs), us(r.NativeLaunchSyncUs))
	row("launch+sync, commands in host memory", us(r.LaunchSyncHostCmdsUs), us(r.NativeLaunchSyncHostCmdsUs))
	fmt.Fprintln(w)
	row("copy size (median of the copies)", "H2D Gbit/s", "D2H Gbit/s")
	copies := slices.Clone(r.Copies)
	slices.SortStableFunc(copies, func(a, b Copy) int { return cmp.Compare(a.SizeBytes, b.SizeBytes) })
	for _, c := range copies {
		row(bytesize.Format(c.SizeBytes), fmt.Sprintf("%.2f", c.H2DGbps), fmt.Sprintf("%.2f", c.D2HGbps))
	}
	row("lossless link goodput", fmt.Sprintf("%.2f", r.LinkGoodputGbps), "")
	row(fmt.Sprintf("raw UDP, %d B datagrams (mean)", r.UDPDatagramBytes), fmt.Sprintf("%.2f", r.UDPGoodputGbps), "")
	row("  before the world, after the link", fmt.Sprintf("%.2f", r.UDPBeforeGbps), fmt.Sprintf("%.2f", r.UDPAfterGbps))
	row(fmt.Sprintf("raw UDP, %d B (the link's mean frame)", r.LinkFrameBytes), fmt.Sprintf("%.2f", r.UDPSameFramesGbps), "")
	if r.TCPGoodputGbps > 0 {
		row("raw TCP", fmt.Sprintf("%.2f", r.TCPGoodputGbps), "")
	}
	fmt.Fprintf(w, "  CPU time per GB copied: %.3f s\n", r.CPUSecondsPerGB)
	if warn := rawgoodput.DriftWarning(r.UDPDrift); warn != "" {
		fmt.Fprintln(w, "  "+warn)
	}
	fmt.Fprintln(w)
	q := r.Ratios
	row("ratio", "value", "target")
	for _, x := range []struct {
		label  string
		v      float64
		target string
	}{
		{"MMIO read p50 / echo p50", q.MMIOP50OverEcho, "<= 1.5"},
		{"MMIO read p99 / echo p99", q.MMIOP99OverEcho, "<= 2"},
		{"(launch+sync - native) / echo p50", q.LaunchSyncExcess, "<= 2"},
		{"  the same, commands in host memory", q.LaunchSyncHostCmdsExcess, ""},
		{"largest H2D copy / link goodput", q.H2DOverLink, ">= 0.5"},
		{"largest D2H copy / link goodput", q.D2HOverLink, ">= 0.5"},
		{"lossless link / raw UDP", q.PairOverUDP, ">= 0.8"},
		{"lossless link / raw UDP at its frame size", q.PairOverUDPSameFrames, ""},
		{"largest H2D copy / raw UDP", q.H2DOverUDP, ">= 0.7"},
		{"largest D2H copy / raw UDP", q.D2HOverUDP, ">= 0.7"},
		{"MMIO read p50 / busy-poll echo p50", q.MMIOP50OverBusyPollEcho, ""},
		{"MMIO read p99 / busy-poll echo p99", q.MMIOP99OverBusyPollEcho, ""},
	} {
		row(x.label, fmt.Sprintf("%.2f", x.v), x.target)
	}
	_, err := fmt.Fprint(w)
	return err
}
