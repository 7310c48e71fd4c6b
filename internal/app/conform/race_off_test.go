//go:build !race

package conform

import "time"

// testSlack is the kit's tolerance on real-time bounds in these tests: on
// a loaded two-core machine the in-process bridge, driven by its own timer
// alone during an outage, was measured silent for up to 56 ms.
const testSlack = 60 * time.Millisecond
const raceEnabled = false
