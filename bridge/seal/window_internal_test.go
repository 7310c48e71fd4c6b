package seal

import (
	"math/rand/v2"
	"testing"
)

// TestWindowMatchesModel drives the ring against a map of every packet
// number accepted: a number opens when it was never accepted and lies
// within WindowLen of the newest.
func TestWindowMatchesModel(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 9))
	var w window
	seen := map[uint64]bool{}
	var newest uint64
	anyYet := false
	for i := 0; i < 200000; i++ {
		var pn uint64
		switch r := rng.IntN(10); {
		case r < 6 || !anyYet: // around the front
			pn = newest + uint64(rng.IntN(70))
			if anyYet && rng.IntN(2) == 0 {
				pn = newest - min(newest, uint64(rng.IntN(WindowLen+130)))
			}
		case r < 9: // a jump ahead
			pn = newest + uint64(rng.IntN(5*WindowLen))
		default: // far behind
			pn = newest - min(newest, uint64(WindowLen+rng.IntN(1000)))
		}
		want := !seen[pn] && (!anyYet || pn > newest || newest-pn < WindowLen)
		if got := w.fresh(pn); got != want {
			t.Fatalf("step %d: fresh(%d) = %v with newest %d, want %v", i, pn, got, newest, want)
		}
		if want {
			w.mark(pn)
			seen[pn] = true
			if !anyYet || pn > newest {
				newest, anyYet = pn, true
			}
		}
	}
}

func TestWindowEdges(t *testing.T) {
	t.Parallel()
	var w window
	w.mark(WindowLen + 100)
	if !w.fresh(101) {
		t.Error("the oldest number inside the window is refused")
	}
	if w.fresh(100) {
		t.Error("the number at the window's left edge is accepted")
	}
	if w.fresh(WindowLen + 100) {
		t.Error("the newest number is accepted twice")
	}
	w.mark(101)
	if w.fresh(101) {
		t.Error("a marked number at the edge is accepted again")
	}
	w.mark(1 << 62) // a jump far ahead clears everything
	if w.fresh(WindowLen+100) || !w.fresh(1<<62-1) {
		t.Error("after a far jump the window does not start afresh")
	}
}
