package host

// watches are the 8-byte words of host memory a CPU spins on (semaphores,
// fences), each with what to run at the next DMA write that touches it.
// lo and hi bound the watched words so that the writes of a copy, which
// touch none of them, cost a comparison instead of a search. The list is
// short (a few words per stream) and kept in registration order; its
// storage is reused, so a watch allocates nothing in steady state.
type watches struct {
	list   []watch
	firing []func() // scratch for the functions of one word
	lo, hi uint64   // lowest and highest watched word; valid while list is not empty
}

type watch struct {
	addr uint64 // the word, 8-byte aligned
	fn   func()
}

// Watch calls fn once, at the next DMA write that touches the 8-byte word
// at addr: it stands for a CPU spinning on that word, without simulating
// every poll.
func (rc *RootComplex) Watch(addr uint64, fn func()) {
	w := &rc.watch
	a := addr &^ 7
	if len(w.list) == 0 {
		w.lo, w.hi = a, a
	}
	w.lo, w.hi = min(w.lo, a), max(w.hi, a)
	w.list = append(w.list, watch{addr: a, fn: fn})
}

// wrote runs and forgets the watches of the words that n bytes written at
// addr touch: word by word upwards, each word's in the order they were
// registered. A watch registered while they run waits for the next write
// if it is on a word already passed.
func (w *watches) wrote(addr, n uint64) {
	if len(w.list) == 0 || addr+n <= w.lo || addr >= w.hi+8 {
		return
	}
	fired := false
	for a := addr &^ 7; a < addr+n; a += 8 {
		// The lowest watched word at or above a, within the write.
		next, found := uint64(0), false
		for _, e := range w.list {
			if e.addr >= a && e.addr < addr+n && (!found || e.addr < next) {
				next, found = e.addr, true
			}
		}
		if !found {
			break
		}
		a = next
		fns := w.firing[:0]
		w.firing = nil // a watch that writes memory gets its own scratch
		keep := w.list[:0]
		for _, e := range w.list {
			if e.addr == a {
				fns = append(fns, e.fn)
			} else {
				keep = append(keep, e)
			}
		}
		clear(w.list[len(keep):])
		w.list = keep
		fired = true
		for _, fn := range fns {
			fn()
		}
		clear(fns)
		w.firing = fns[:0]
	}
	if fired {
		w.bound()
	}
}

// bound recomputes lo and hi after watches fired.
func (w *watches) bound() {
	for i, e := range w.list {
		if i == 0 {
			w.lo, w.hi = e.addr, e.addr
		}
		w.lo, w.hi = min(w.lo, e.addr), max(w.hi, e.addr)
	}
}
