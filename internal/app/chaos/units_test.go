package chaos

import (
	"strings"
	"testing"
	"time"
)

// TestTextWritesUs: the checker's violations and the text report spell
// durations as `dxpu help units` does (a bound of 500us, never Go's
// 500µs), whatever bounds the campaign was given.
func TestTextWritesUs(t *testing.T) {
	b := Bounds{PairUp: 500 * time.Microsecond, KeySplit: 600 * time.Microsecond, Converge: 700 * time.Microsecond}
	res := Check(history(10*time.Second, func(t time.Duration) world {
		w := healthy()
		if t >= time.Second && t < 6*time.Second { // down, and the box on a fresh key
			w.boxLink, w.boxGen = "down", 4
		}
		if t >= 6*time.Second && t < 8*time.Second {
			w.switchVer = 4 // converged late
		}
		return w
	}), 2*time.Second, b)
	never := Check(history(10*time.Second, func(t time.Duration) world {
		w := healthy()
		w.switchVer = 4
		return w
	}), 2*time.Second, b)
	var msgs []string
	for _, v := range append(res.Violations, never.Violations...) {
		msgs = append(msgs, v.Message)
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{"down for 200ms (bound 500us)", "for 200ms (bound 600us)", "converged 6s after the nemesis stopped (bound 700us)",
		"not converged 8s after the nemesis stopped (bound 700us)"} {
		if !strings.Contains(all, want) || strings.Contains(all, "µ") {
			t.Errorf("violations, want one naming %s:\n%s", want, all)
		}
	}
	r := Report{Duration: 5 * time.Second, Bounds: b, HostBounds: map[string]Bounds{"host1": b},
		Schedule: []Fault{{At: time.Second, Kind: FaultStop, Target: "box1", For: 750 * time.Microsecond}}, Result: res}
	var txt strings.Builder
	if err := r.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"(bounds: pair up 500us, key split 600us, converge 700us)", "host1's own bounds (a VM host): pair up 500us, key split 600us, converge 700us",
		"stop              box1 for 750us", "(bound 500us)"} {
		if !strings.Contains(txt.String(), want) || strings.Contains(txt.String(), "µ") {
			t.Errorf("the text report, want %q and no µs:\n%s", want, txt.String())
		}
	}
}

// TestRunRefusesShortWritesUs: Run's refusal of a short campaign names
// the duration given as `dxpu help units` spells it.
func TestRunRefusesShortWritesUs(t *testing.T) {
	_, err := Run(t.Context(), Options{Duration: 500 * time.Microsecond})
	if err == nil || !strings.HasPrefix(err.Error(), "--duration 500us: a campaign needs at least 5s") {
		t.Errorf("Run for 500us: %v, want --duration 500us refused", err)
	}
}
