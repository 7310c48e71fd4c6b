package conform

import (
	"strings"
	"testing"
	"time"
)

// TestFlapShortKitStalled: a kit stalled for most of every wait makes
// each of its outages of half DeadAfter last past DeadAfter on the wall
// clock, and the bridge rightly ends the session. That is the kit's doing,
// not a DeadAfter shorter than the kit was told: LNK-3 is not judged
// (n/a, naming the stall) rather than the run refused as a mismatch (a
// loaded CI machine: "declared the link down after 1.000385s of silence,
// the kit was told --dead-after 1s").
func TestFlapShortKitStalled(t *testing.T) {
	defer func() { madeUpStalls = nil }()
	// Three quarters of every span stalled: the kit's waits last four
	// times as long on the wall clock.
	madeUpStalls = func(from, to time.Duration) time.Duration { return (to - from) * 3 / 4 }
	rep, err := runKit(t, setup{controlled: true}, "flap-short")
	if err != nil {
		t.Fatalf("kit: %v", err)
	}
	for _, r := range rep.Results {
		if r.Rule != "LNK-3" {
			continue
		}
		if r.Verdict != NA || !strings.Contains(r.Reason, "the kit stalled") {
			t.Fatalf("LNK-3: %s (%s), want n/a naming the kit's stall", r.Verdict, r.Reason)
		}
		return
	}
	t.Fatal("no LNK-3 in the report")
}
