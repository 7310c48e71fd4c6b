package pool

import (
	"errors"
	"testing"
)

// TestRestoreAllOrNothing: a Restore that fails on its last GPU, whatever
// the reason, leaves the pool exactly as it was: none of the GPUs before
// it lent, no pair or host port taken; the same GPUs then restore cleanly.
func TestRestoreAllOrNothing(t *testing.T) {
	t.Parallel()
	good := []Assignment{
		{GPU: "b-g0", Box: "b", Pair: 1, HostPort: 0},
		{GPU: "b-g1", Box: "b", Pair: 2, HostPort: 1},
	}
	for _, c := range []struct {
		name string
		last Assignment
		want error
	}{
		{"unknown GPU", Assignment{GPU: "nope", Box: "b", Pair: 3, HostPort: 2}, ErrNotFound},
		{"GPU twice", Assignment{GPU: "b-g0", Box: "b", Pair: 3, HostPort: 2}, ErrConflict},
		{"wrong box", Assignment{GPU: "b-g2", Box: "other", Pair: 3, HostPort: 2}, ErrConflict},
		{"pair zero", Assignment{GPU: "b-g2", Box: "b", Pair: 0, HostPort: 2}, ErrInvalid},
		{"pair twice", Assignment{GPU: "b-g2", Box: "b", Pair: 2, HostPort: 2}, ErrConflict},
		{"port out of range", Assignment{GPU: "b-g2", Box: "b", Pair: 3, HostPort: 32}, ErrInvalid},
		{"port twice", Assignment{GPU: "b-g2", Box: "b", Pair: 3, HostPort: 1}, ErrConflict},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := New()
			mustAdd(t, p, box("b", "p", "r", 4, "A100", 40<<10), host("h", "p", "r"))
			before := snapshot(p)
			a := Allocation{ID: "a", Host: "h", State: StateActive, GPUs: append(append([]Assignment(nil), good...), c.last)}
			if err := p.Restore(a); !errors.Is(err, c.want) {
				t.Fatalf("Restore: %v, want %v", err, c.want)
			}
			if after := snapshot(p); after != before {
				t.Fatalf("a failed Restore changed the pool\nbefore %s\nafter  %s", before, after)
			}
			for _, g := range good {
				if st, err := p.GPU(g.GPU); err != nil || st.Allocation != "" {
					t.Fatalf("GPU %s after a failed Restore: %+v, %v", g.GPU, st, err)
				}
			}
			check(t, p)
			a.GPUs = good
			if err := p.Restore(a); err != nil {
				t.Fatalf("Restore of the good GPUs after the failed one: %v", err)
			}
			check(t, p)
		})
	}
}
