package seal

// WindowLen is how far behind the newest authenticated packet number a
// frame may arrive and still open once: the receiver accepts packet number
// p when newest-WindowLen < p and p was not seen.
const WindowLen = 2048

// The ring holds one word more than WindowLen bits, so after sliding to a
// new newest packet number every number within WindowLen behind it still
// has its own bit (the word holding the left edge is only partly in use).
const windowWords = WindowLen/64 + 1

// window is a sliding replay window over 64-bit packet numbers, a bitmap
// ring indexed by packet number: bit p%64 of word (p/64)%windowWords.
type window struct {
	newest uint64 // highest packet number accepted
	any    bool   // some packet number was accepted
	ring   [windowWords]uint64
}

// fresh reports whether pn would be accepted; it changes nothing.
func (w *window) fresh(pn uint64) bool {
	if !w.any || pn > w.newest {
		return true
	}
	if w.newest-pn >= WindowLen {
		return false
	}
	return w.ring[(pn/64)%windowWords]&(1<<(pn%64)) == 0
}

// mark records pn as seen (after fresh and after authentication), sliding
// the window when pn is the new newest.
func (w *window) mark(pn uint64) {
	if !w.any {
		w.any, w.newest = true, pn
		w.ring[(pn/64)%windowWords] = 1 << (pn % 64)
		return
	}
	if pn > w.newest {
		cur, next := w.newest/64, pn/64
		if next-cur >= windowWords {
			w.ring = [windowWords]uint64{}
		} else {
			for i := cur + 1; i <= next; i++ {
				w.ring[i%windowWords] = 0
			}
		}
		w.newest = pn
	}
	w.ring[(pn/64)%windowWords] |= 1 << (pn % 64)
}
