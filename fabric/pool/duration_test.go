package pool

import (
	"encoding/json"
	"testing"
	"time"
)

// TestDurationWritesUs: the API writes a duration as `dxpu help units`
// spells it ("7us", never Go's "7µs"), and reads it back.
func TestDurationWritesUs(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{7 * time.Microsecond: "7us", 1500 * time.Microsecond: "1.5ms", 250 * time.Nanosecond: "250ns", 0: "0s"} {
		b, err := json.Marshal(Duration(d))
		var back Duration
		if err != nil || Duration(d).String() != want || string(b) != `"`+want+`"` || json.Unmarshal(b, &back) != nil || back != Duration(d) {
			t.Errorf("%d ns: String %q, JSON %s (%v), read back %d; want %q", d, Duration(d).String(), b, err, back, want)
		}
	}
}
