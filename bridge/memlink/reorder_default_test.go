package memlink

import (
	"testing"
	"time"
)

// TestReorderDelayDefault: with ReorderDelay 0, a frame held back for
// reordering waits Delay + 5 us (ReorderSlack) beyond its normal arrival,
// as the field's doc says: a lone frame sent at 0 over a 10 us link
// arrives at 25 us. A ReorderDelay that is set stays as set.
func TestReorderDelayDefault(t *testing.T) {
	t.Parallel()
	const delay = 10 * time.Microsecond
	if got := (Faults{Delay: delay}).WithDefaults().ReorderDelay; got != delay+5*time.Microsecond || ReorderSlack != 5*time.Microsecond {
		t.Fatalf("default ReorderDelay over a %v link: %v (ReorderSlack %v), want %v", delay, got, ReorderSlack, delay+5*time.Microsecond)
	}
	if got := (Faults{Delay: delay, ReorderDelay: 3 * time.Microsecond}).WithDefaults().ReorderDelay; got != 3*time.Microsecond {
		t.Fatalf("ReorderDelay 3us became %v", got)
	}
	at, _, l := run(t, Faults{Reorder: 1, Delay: delay}, 1, nil)
	if len(at) != 1 || at[0] != 25*time.Microsecond || l.Stats.Reordered != 1 {
		t.Fatalf("a lone reordered frame over a %v link arrived at %v (%d reordered), want 25us", delay, at, l.Stats.Reordered)
	}
}
