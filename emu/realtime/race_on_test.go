//go:build race

package realtime

// raceEnabled: the race detector allocates on its own (and sync.Pool
// drops entries at random under it), so allocation counts mean nothing.
const raceEnabled = true
