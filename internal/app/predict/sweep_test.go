package predict

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/app/apperr"
)

// TestSweepNeedsUnits: --sweep takes durations with their unit, as --rtt
// does; a bare number is refused by name.
func TestSweepNeedsUnits(t *testing.T) {
	t.Parallel()
	got, err := parseSweep("0,2us,5µs,1ms")
	if err != nil || len(got) != 4 || got[1] != 2*time.Microsecond || got[3] != time.Millisecond {
		t.Fatalf("parseSweep: %v %v", got, err)
	}
	for _, bad := range []string{"2,5", "2us,5", "1.5", "x"} {
		if _, err := parseSweep(bad); !errors.Is(err, apperr.ErrUsage) {
			t.Errorf("--sweep %s: %v, want a usage error", bad, err)
		} else if bad == "2us,5" && !strings.Contains(err.Error(), `"5" has no unit`) {
			t.Errorf("--sweep %s: %v does not name the bare number", bad, err)
		}
	}
}
