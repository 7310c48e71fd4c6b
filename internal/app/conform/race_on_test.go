//go:build race

package conform

import "time"

// testSlack: the race detector slows the bridge under test several times.
const testSlack = 100 * time.Millisecond
const raceEnabled = true
