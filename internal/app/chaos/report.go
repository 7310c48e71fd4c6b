package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/dxpu/dxpu/internal/app/units"
)

// OpCount counts one kind of operation.
type OpCount struct {
	OK     int `json:"ok"`
	Failed int `json:"failed"`
	// Errors are the first distinct errors of the failed ones (at most
	// three), with the allocation and pair IDs left in.
	Errors []string `json:"errors,omitempty"`
}

// Report is a campaign's outcome.
type Report struct {
	Seed     int64
	Duration time.Duration
	Bounds   Bounds
	// HostBounds are hosts' own bounds (a VM host's), if any.
	HostBounds       map[string]Bounds
	Schedule         []Fault
	Operations       int
	OperationsFailed int
	OperationsByName map[string]OpCount
	Faults           int
	FaultsByKind     map[string]int
	Observations     int
	Result
	// History is what the campaign recorded (WriteHistory writes it).
	History []Event
}

// WriteHistory writes the history, one JSON object a line.
func (r Report) WriteHistory(w io.Writer) error {
	enc := json.NewEncoder(w)
	for _, e := range r.History {
		if err := enc.Encode(e); err != nil {
			return err
		}
	}
	return nil
}

// Summarize counts a history's operations, faults and observations. Pure.
func Summarize(h []Event, sched []Fault, res Result) Report {
	rep := Report{Schedule: sched, OperationsByName: map[string]OpCount{}, FaultsByKind: map[string]int{}, Result: res}
	for _, e := range h {
		switch e.Kind {
		case EvOp:
			c := rep.OperationsByName[e.Name]
			rep.Operations++
			if e.Err != "" {
				c.Failed++
				rep.OperationsFailed++
				if len(c.Errors) < 3 && !slices.Contains(c.Errors, e.Err) {
					c.Errors = append(c.Errors, e.Err)
				}
			} else {
				c.OK++
			}
			rep.OperationsByName[e.Name] = c
		case EvFault:
			rep.Faults++
			rep.FaultsByKind[e.Name]++
		case EvObs:
			rep.Observations++
		}
	}
	return rep
}

// WriteJSON writes the report as one object.
func (r Report) WriteJSON(w io.Writer) error {
	vs := r.Violations
	if vs == nil {
		vs = []Violation{}
	}
	byKind := map[string]int{}
	for _, v := range vs {
		byKind[v.Kind]++
	}
	var hostBounds map[string]any
	for h, hb := range r.HostBounds {
		if hostBounds == nil {
			hostBounds = map[string]any{}
		}
		hostBounds[h] = map[string]int64{"pair_up_bound_ms": hb.PairUp.Milliseconds(),
			"key_split_bound_ms": hb.KeySplit.Milliseconds(), "converge_bound_ms": hb.Converge.Milliseconds()}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Seed             int64              `json:"seed"`
		DurationMS       int64              `json:"duration_ms"`
		PairUpBoundMS    int64              `json:"pair_up_bound_ms"`
		KeySplitBoundMS  int64              `json:"key_split_bound_ms"`
		ConvergeBoundMS  int64              `json:"converge_bound_ms"`
		HostBounds       map[string]any     `json:"host_bounds,omitempty"`
		Schedule         []Fault            `json:"schedule"`
		Operations       int                `json:"operations"`
		OperationsFailed int                `json:"operations_failed"`
		OperationsByName map[string]OpCount `json:"operations_by_name"`
		Faults           int                `json:"faults"`
		FaultsByKind     map[string]int     `json:"faults_by_kind"`
		Observations     int                `json:"observations"`
		Converged        bool               `json:"converged"`
		WorstConvergeMS  int64              `json:"worst_converge_ms"`
		ViolationsByKind map[string]int     `json:"violations_by_kind"`
		Violations       []Violation        `json:"violations"`
	}{r.Seed, r.Duration.Milliseconds(), r.Bounds.PairUp.Milliseconds(), r.Bounds.KeySplit.Milliseconds(), r.Bounds.Converge.Milliseconds(),
		hostBounds, r.Schedule, r.Operations, r.OperationsFailed, r.OperationsByName, r.Faults, r.FaultsByKind, r.Observations,
		r.Converged, r.WorstConverge.Milliseconds(), byKind, vs})
}

func counts[V any](m map[string]V, f func(V) string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " " + f(m[k])
	}
	return strings.Join(parts, ", ")
}

// WriteText writes the report for a person.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	b.WriteString(units.Sprintf("dxpu chaos: seed %d, %v of workload and faults (bounds: pair up %v, key split %v, converge %v)\n",
		r.Seed, r.Duration, r.Bounds.PairUp, r.Bounds.KeySplit, r.Bounds.Converge))
	for _, h := range slices.Sorted(maps.Keys(r.HostBounds)) {
		hb := r.HostBounds[h]
		b.WriteString(units.Sprintf("%s's own bounds (a VM host): pair up %v, key split %v, converge %v\n", h, hb.PairUp, hb.KeySplit, hb.Converge))
	}
	WriteSchedule(&b, r.Schedule)
	fmt.Fprintf(&b, "operations:   %d (%d failed): %s\n", r.Operations, r.OperationsFailed,
		counts(r.OperationsByName, func(c OpCount) string { return fmt.Sprintf("%d/%d", c.OK, c.OK+c.Failed) }))
	for _, name := range slices.Sorted(maps.Keys(r.OperationsByName)) {
		for _, err := range r.OperationsByName[name].Errors {
			fmt.Fprintf(&b, "  %s failed: %s\n", name, err)
		}
	}
	fmt.Fprintf(&b, "faults:       %d: %s\n", r.Faults, counts(r.FaultsByKind, func(n int) string { return fmt.Sprint(n) }))
	fmt.Fprintf(&b, "observations: %d\n", r.Observations)
	conv := "no"
	if r.Converged {
		conv = "yes"
	}
	b.WriteString(units.Sprintf("converged:    %s; worst time to converge %v\n", conv, r.WorstConverge.Round(time.Millisecond)))
	fmt.Fprintf(&b, "violations:   %d\n", len(r.Violations))
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "  %s %s at %.2fs: %s\n", v.Kind, v.Subject, v.At.Seconds(), v.Message)
		for _, l := range v.Excerpt {
			fmt.Fprintf(&b, "      %s\n", l)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteSchedule prints a schedule, one fault a line.
func WriteSchedule(w io.Writer, s []Fault) {
	fmt.Fprintf(w, "schedule (%d faults):\n", len(s))
	for _, f := range s {
		fmt.Fprintf(w, "  %s\n", f)
	}
}
