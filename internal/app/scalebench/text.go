package scalebench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteText prints r as a table, a scenario a line.
func (r Result) WriteText(w io.Writer) error {
	seal := "sealed (AES-256-GCM)"
	if !r.Sealed {
		seal = "unkeyed"
	}
	pin := ""
	if r.Pinned {
		pin = ", a core per pair"
	}
	fmt.Fprintf(w, "%s, %d cores, %s pairs%s; each pair %d reads of %d B outstanding, %.3g s per scenario\n",
		r.Mode, r.Cores, seal, pin, r.ReadersPerPair, r.ReadBytes, r.Seconds)
	fmt.Fprintf(w, "raw UDP (%d-byte datagrams, same path): %.2f Gbit/s", r.UDPDatagramBytes, r.UDPGoodputGbps)
	if r.SinglePairGbps > 0 {
		fmt.Fprintf(w, "; one pair: %.2f Gbit/s", r.SinglePairGbps)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tpairs\thosts\tboxes\taggregate Gbit/s\tper pair min-max\tJain\tx linear\tx UDP\tMMIO p50/p99 us\techo p50/p99 us\tidle MMIO p50/p99 us\tCPU s/GB bridges\tload\tread errors\tretransmits\tcredit stalls\tswitch drops")
	for _, s := range r.Scenarios {
		lin, drops := "-", "-"
		if s.ScalingOverLinear > 0 {
			lin = fmt.Sprintf("%.2f", s.ScalingOverLinear)
		}
		if s.SwitchDrops != nil {
			drops = fmt.Sprint(*s.SwitchDrops)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.2f\t%.2f-%.2f\t%.3f\t%s\t%.2f\t%.0f/%.0f\t%.0f/%.0f\t%.0f/%.0f\t%.1f\t%.1f\t%d\t%d\t%d\t%s\n",
			s.Name, s.Pairs, s.Hosts, s.Boxes, s.AggregateGbps, s.MinPairGbps, s.MaxPairGbps, s.JainFairness, lin, s.AggregateOverUDP,
			s.MMIOReadP50Us, s.MMIOReadP99Us, s.EchoP50Us, s.EchoP99Us, s.MMIOIdleP50Us, s.MMIOIdleP99Us,
			s.CPUSecondsPerGB, s.LoadCPUSecondsPerGB, s.ReadErrors, s.Retransmits, s.CreditStalls, drops)
	}
	return tw.Flush()
}
