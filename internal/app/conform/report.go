package conform

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/dxpu/dxpu/internal/app/units"
)

// Verdict is the outcome for one rule.
type Verdict string

// Verdicts.
const (
	Pass Verdict = "pass"
	Fail Verdict = "fail"
	NA   Verdict = "n/a" // not exercised: the scenario could not reach it
)

// Result is the verdict on one rule, with the reason: for a failure the
// first violation seen, for a pass what was checked, for n/a why not.
type Result struct {
	Rule    string  `json:"rule"`
	Summary string  `json:"summary"`
	Verdict Verdict `json:"verdict"`
	Reason  string  `json:"reason"`
	// Checks counts the observations that exercised the rule.
	Checks int `json:"checks"`
}

// Report is the outcome of a run: one result per rule of the catalogue.
type Report struct {
	Peer     string        `json:"peer"`
	Role     string        `json:"role"` // of the implementation under test
	Duration time.Duration `json:"duration_ns"`
	Seed     uint64        `json:"seed"` // of the kit's nonces, ISNs and data (--seed)
	Results  []Result      `json:"results"`
}

// Failed returns the failed results.
func (r *Report) Failed() []Result {
	var f []Result
	for _, x := range r.Results {
		if x.Verdict == Fail {
			f = append(f, x)
		}
	}
	return f
}

// Result returns the result for rule id.
func (r *Report) Result(id string) (Result, bool) {
	for _, x := range r.Results {
		if x.Rule == id {
			return x, true
		}
	}
	return Result{}, false
}

// WriteText writes one line per rule: identifier, verdict, reason.
func (r *Report) WriteText(w io.Writer) error {
	var pass, fail, na int
	for _, x := range r.Results {
		if _, err := fmt.Fprintf(w, "%-7s %-4s %s\n", x.Rule, x.Verdict, x.Reason); err != nil {
			return err
		}
		switch x.Verdict {
		case Pass:
			pass++
		case Fail:
			fail++
		default:
			na++
		}
	}
	_, err := fmt.Fprintf(w, "%d pass, %d fail, %d n/a against %s (%s side) in %s, seed %d\n", pass, fail, na, r.Peer, r.Role, units.Duration(r.Duration.Round(time.Millisecond)), r.Seed)
	return err
}

// WriteJSON writes the report as one indented JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// ledger collects verdicts while scenarios run: a rule fails with its
// first violation, passes once exercised without one, and is n/a
// otherwise.
type ledger struct {
	res      map[string]*Result
	scenario string // named in every reason
}

func newLedger() *ledger {
	l := &ledger{res: map[string]*Result{}}
	for _, r := range catalogue {
		l.res[r.ID] = &Result{Rule: r.ID, Summary: r.Summary, Verdict: NA, Reason: "not exercised"}
		if why, ok := fixedNA[r.ID]; ok {
			l.res[r.ID].Reason = why
		}
	}
	return l
}

func (l *ledger) get(id string) *Result {
	r, ok := l.res[id]
	if !ok {
		// A rule missing from the catalogue is a bug of the kit; keep it
		// visible in the report rather than panic.
		r = &Result{Rule: id, Summary: summaryOf(id), Verdict: NA}
		l.res[id] = r
	}
	return r
}

// pass records a check of id that found nothing wrong; the first reason
// is kept.
func (l *ledger) pass(id, format string, args ...any) {
	r := l.get(id)
	r.Checks++
	if r.Verdict == NA {
		r.Verdict, r.Reason = Pass, l.where()+units.Sprintf(format, args...)
	}
}

func (l *ledger) where() string {
	if l.scenario == "" {
		return ""
	}
	return l.scenario + ": "
}

// fail records a violation of id; the first one is kept.
func (l *ledger) fail(id, format string, args ...any) {
	r := l.get(id)
	r.Checks++
	if r.Verdict != Fail {
		r.Verdict, r.Reason = Fail, l.where()+units.Sprintf(format, args...)
	}
}

// na explains why id was not exercised, unless it already was.
func (l *ledger) na(id, format string, args ...any) {
	r := l.get(id)
	if r.Verdict == NA {
		r.Reason = l.where() + units.Sprintf(format, args...)
	}
}

func (l *ledger) failed(id string) bool { return l.get(id).Verdict == Fail }

func (l *ledger) results() []Result {
	out := make([]Result, 0, len(l.res))
	for _, r := range catalogue {
		out = append(out, *l.res[r.ID])
	}
	for id, r := range l.res {
		if summaryOf(id) == "" {
			out = append(out, *r)
		}
	}
	return out
}
