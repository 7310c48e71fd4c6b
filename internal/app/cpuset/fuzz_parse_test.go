package cpuset

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// FuzzParse reads arbitrary CPU lists (--cpus, and the kernel's online
// list). Invariants: a refusal wraps ErrSyntax and is one line; a set is
// sorted, without duplicates, within 0..MaxCPU (so at most MaxCPU+1
// CPUs), and its String reads back to the same set.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"3", "0-3", "0-1,8,10-11", " 2 , 1 ", "0-1023", "5-3", "1024", "-", "1,,2", "0-1023,0-1023"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := Parse(s)
		if err != nil {
			if msg := err.Error(); !errors.Is(err, ErrSyntax) || strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("refusal %q", msg)
			}
			return
		}
		if len(set) == 0 || len(set) > MaxCPU+1 || !slices.IsSorted(set) || len(slices.Compact(slices.Clone(set))) != len(set) || set[0] < 0 || set[len(set)-1] > MaxCPU {
			t.Fatalf("%q parsed as %v", s, set)
		}
		back, err := Parse(set.String())
		if err != nil || !slices.Equal(back, set) {
			t.Fatalf("%q -> %v -> %q -> %v (%v)", s, set, set.String(), back, err)
		}
	})
}
