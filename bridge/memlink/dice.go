package memlink

import (
	"hash/crc32"
	"math/rand/v2"
)

// Dice draws the per-frame faults of Faults and counts them in Stats. The
// virtual-time Link and the real-time driver.Faulty share it, so that the
// two fault models cannot drift apart; each keeps its own order of draws.
type Dice struct {
	F     Faults
	Rng   *rand.Rand
	Stats *Stats
}

func (d *Dice) chance(p float64) bool { return p > 0 && d.Rng.Float64() < p }

// Offer counts a frame of n bytes sent on a link that is down or up and
// reports whether it goes on: not when the link is down or the frame lost.
func (d *Dice) Offer(n int, down bool) bool {
	d.Stats.Sent++
	d.Stats.Bytes += uint64(n)
	if down {
		d.Stats.DownDrops++
		return false
	}
	if d.chance(d.F.Loss) {
		d.Stats.Lost++
		return false
	}
	return true
}

// Copies draws duplication: how many copies of a frame go on, 1 or 2.
func (d *Dice) Copies() int {
	if d.chance(d.F.Duplicate) {
		d.Stats.Duplicated++
		return 2
	}
	return 1
}

// Reorder draws whether a copy is held back for ReorderDelay.
func (d *Dice) Reorder() bool {
	if d.chance(d.F.Reorder) {
		d.Stats.Reordered++
		return true
	}
	return false
}

// Corrupt draws corruption of b: one random bit flipped in place. It
// reports whether the frame check sequence no longer matches, so that the
// receiving NIC drops the frame unless PassCorrupt is set.
func (d *Dice) Corrupt(b []byte) bool {
	if !d.chance(d.F.Corrupt) || len(b) == 0 {
		return false
	}
	d.Stats.Corrupted++
	sum := crc32.ChecksumIEEE(b)
	bit := d.Rng.IntN(len(b) * 8)
	b[bit/8] ^= 1 << (bit % 8)
	return crc32.ChecksumIEEE(b) != sum
}
