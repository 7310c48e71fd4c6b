package host

// watches are the 8-byte words of host memory a CPU spins on (semaphores,
// fences), each with what to run at the next DMA write that touches it.
// lo and hi bound the watched words so that the writes of a copy, which
// touch none of them, cost a comparison instead of a lookup per word.
type watches struct {
	m      map[uint64][]func()
	lo, hi uint64 // lowest and highest watched word; valid while m is not empty
}

// Watch calls fn once, at the next DMA write that touches the 8-byte word
// at addr: it stands for a CPU spinning on that word, without simulating
// every poll.
func (rc *RootComplex) Watch(addr uint64, fn func()) {
	w := &rc.watch
	a := addr &^ 7
	if len(w.m) == 0 {
		w.lo, w.hi = a, a
	}
	w.lo, w.hi = min(w.lo, a), max(w.hi, a)
	w.m[a] = append(w.m[a], fn)
}

// wrote runs and forgets the watches of the words that n bytes written at
// addr touch.
func (w *watches) wrote(addr, n uint64) {
	if len(w.m) == 0 || addr+n <= w.lo || addr >= w.hi+8 {
		return
	}
	fired := false
	for a := addr &^ 7; a < addr+n; a += 8 {
		if fns, ok := w.m[a]; ok {
			delete(w.m, a)
			fired = true
			for _, fn := range fns {
				fn()
			}
		}
	}
	if fired {
		w.bound()
	}
}

// bound recomputes lo and hi after watches fired (the map is small: a
// few words per stream).
func (w *watches) bound() {
	first := true
	for a := range w.m {
		if first {
			w.lo, w.hi, first = a, a, false
		}
		w.lo, w.hi = min(w.lo, a), max(w.hi, a)
	}
}
