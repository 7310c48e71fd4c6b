package bridge

// reorderWindow holds received TLPs by sequence number until the ones
// before them arrive: a ring of Window receive-pool slots starting at
// next, the first sequence number not yet received in order.
type reorderWindow struct {
	slots []int32  // receive-pool slot per sequence number mod Window; -1 empty
	lens  []uint16 // TLP length per slot
	mask  uint32   // Window-1
	next  uint32
	held  int // TLPs held (out of order)
}

// Where an arriving sequence number falls.
type arrival uint8

const (
	arrivalNew    arrival = iota // in the window and not held: store it
	arrivalOld                   // before next: received already
	arrivalHeld                  // in the window and held already: a duplicate
	arrivalBeyond                // past the window
)

func newReorderWindow(window int) reorderWindow {
	w := reorderWindow{slots: make([]int32, window), lens: make([]uint16, window), mask: uint32(window - 1)}
	for i := range w.slots {
		w.slots[i] = -1
	}
	return w
}

// classify says where seq falls.
func (w *reorderWindow) classify(seq uint32) arrival {
	if seqLT(seq, w.next) {
		return arrivalOld
	}
	if seq-w.next >= uint32(len(w.slots)) {
		return arrivalBeyond
	}
	if w.slots[seq&w.mask] >= 0 {
		return arrivalHeld
	}
	return arrivalNew
}

// store holds the TLP of length n in slot for seq, which classify found
// new.
func (w *reorderWindow) store(seq uint32, slot int32, n int) {
	i := seq & w.mask
	w.slots[i], w.lens[i] = slot, uint16(n)
	w.held++
}

// head returns the slot and length of TLP next, if it arrived.
func (w *reorderWindow) head() (slot int32, n int, ok bool) {
	i := w.next & w.mask
	if w.slots[i] < 0 {
		return -1, 0, false
	}
	return w.slots[i], int(w.lens[i]), true
}

// advance takes TLP next out (head found it) and moves on to the following
// sequence number.
func (w *reorderWindow) advance() {
	w.slots[w.next&w.mask] = -1
	w.held--
	w.next++
}

// hole reports whether TLPs are held behind a missing one at next.
func (w *reorderWindow) hole() bool { return w.held > 0 && w.slots[w.next&w.mask] < 0 }

// sack returns the SACK bitmap: bit i set when TLP next+1+i is held.
// Every frame's header carries it, and in order nothing is held: that case
// skips the walk.
func (w *reorderWindow) sack() uint32 {
	var m uint32
	if w.held == 0 {
		return 0
	}
	lim := min(32, len(w.slots)-1)
	for i := 0; i < lim; i++ {
		if w.slots[(w.next+1+uint32(i))&w.mask] >= 0 {
			m |= 1 << i
		}
	}
	return m
}

// restart empties the window, handing every held slot to free, and expects
// next from now on.
func (w *reorderWindow) restart(next uint32, free *pool) {
	for i, s := range w.slots {
		if s >= 0 {
			free.put(s)
			w.slots[i] = -1
		}
	}
	w.held = 0
	w.next = next
}

// count returns the slots in use, counted one by one (for invariants).
func (w *reorderWindow) count() int {
	n := 0
	for _, s := range w.slots {
		if s >= 0 {
			n++
		}
	}
	return n
}
