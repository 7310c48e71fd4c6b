package rawgoodput

import "fmt"

// Bracket is two floods of one path, just before and just after what
// they are the baseline of: a shared machine's speed drifts (one 2-core
// VM flooded 12-14 Gbit/s for minutes, then 7-8), and one flood measures
// only the machine of its moment.
type Bracket struct{ Before, After UDPResult }

// GoodputGbps is the two floods' mean, the figure ratios are taken of.
func (b Bracket) GoodputGbps() float64 { return (b.Before.GoodputGbps + b.After.GoodputGbps) / 2 }

// CPUSecondsPerGB is the two floods' mean CPU seconds per GB.
func (b Bracket) CPUSecondsPerGB() float64 {
	return (b.Before.CPUSecondsPerGB + b.After.CPUSecondsPerGB) / 2
}

// Drift is the larger flood's goodput over the smaller's.
func (b Bracket) Drift() float64 {
	x, y := b.Before.GoodputGbps, b.After.GoodputGbps
	return max(x, y) / min(x, y)
}

// DriftWarn is the Drift above which a report warns that its run is not
// to be compared.
const DriftWarn = 1.25

// DriftWarning is the line a text report prints for drift, "" at or
// under DriftWarn.
func DriftWarning(drift float64) string {
	if drift <= DriftWarn {
		return ""
	}
	return fmt.Sprintf("warning: the two UDP floods differ %.2fx: the machine's speed changed during the run; run again before comparing", drift)
}
