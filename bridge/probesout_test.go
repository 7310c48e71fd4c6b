package bridge

import "testing"

// TestProbesOut: an answer takes its probe and every older one and gives
// the transmissions before it; an unknown or already answered probe gives
// nothing; past maxProbesOut the oldest is forgotten.
func TestProbesOut(t *testing.T) {
	t.Parallel()
	var q probesOut
	for i := 1; i <= 3; i++ {
		q.add(uint8(i), uint64(10*i))
	}
	if tx, ok := q.answer(2); !ok || tx != 20 {
		t.Fatalf("answer 2: %d %v, want 20 true", tx, ok)
	}
	if _, ok := q.answer(1); ok {
		t.Fatal("probe 1, older than the answered 2, still out")
	}
	if tx, ok := q.answer(3); !ok || tx != 30 {
		t.Fatalf("answer 3: %d %v", tx, ok)
	}
	if _, ok := q.answer(3); ok || q.n != 0 {
		t.Fatalf("probe 3 answered twice, %d left", q.n)
	}
	for i := 1; i <= maxProbesOut+2; i++ {
		q.add(uint8(i), uint64(i))
	}
	if _, ok := q.answer(1); ok || q.n != maxProbesOut {
		t.Fatalf("the oldest kept past %d probes (%d out)", maxProbesOut, q.n)
	}
	if tx, ok := q.answer(3); !ok || tx != 3 || q.n != maxProbesOut-1 {
		t.Fatalf("answer 3: %d %v, %d out", tx, ok, q.n)
	}
}
