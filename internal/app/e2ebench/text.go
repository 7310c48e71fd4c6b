package e2ebench

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/dxpu/dxpu/internal/app/bytesize"
	"github.com/dxpu/dxpu/internal/app/rawgoodput"
)

// WriteText prints r for a reader: latencies, copies by size (smallest
// first, whatever order the JSON maps keep), the link and the ratios
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
	for _, s := range SizesOf(r.H2DGbps, r.D2HGbps) {
		k := strconv.FormatUint(s, 10)
		row(bytesize.Format(s), rate(r.H2DGbps, k), rate(r.D2HGbps, k))
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

func rate(m map[string]float64, k string) string {
	if v, ok := m[k]; ok {
		return fmt.Sprintf("%.2f", v)
	}
	return "-"
}

// SizesOf returns the byte sizes that key the maps, ascending: JSON maps
// keep their keys as strings, which sort "16777216" before "262144".
func SizesOf(ms ...map[string]float64) []uint64 {
	var out []uint64
	for _, m := range ms {
		for k := range m {
			if s, err := strconv.ParseUint(k, 10, 64); err == nil && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	slices.Sort(out)
	return out
}
