package fakeagent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dxpu/dxpu/fabric/manager"
)

func TestFailNthAndIdempotence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := New("x")
	a.FailNth(OpProgram, 2)
	if err := a.ProgramPair(ctx, manager.Pair{ID: 1, Allocation: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := a.ProgramPair(ctx, manager.Pair{ID: 2, Allocation: "a"}); !errors.Is(err, ErrInjected) {
		t.Fatalf("second call: %v", err)
	}
	if err := a.ProgramPair(ctx, manager.Pair{ID: 2, Allocation: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := a.ProgramPair(ctx, manager.Pair{ID: 2, Allocation: "a"}); err != nil {
		t.Fatalf("reprogramming is idempotent: %v", err)
	}
	if err := a.ProgramPair(ctx, manager.Pair{ID: 2, Allocation: "b"}); err == nil {
		t.Fatal("pair of another allocation overwritten")
	}
	if err := a.RemovePair(ctx, manager.Pair{ID: 9}); err != nil {
		t.Fatalf("removing an absent pair: %v", err)
	}
	if err := a.HotAdd(ctx, manager.Pair{ID: 9}); err == nil {
		t.Fatal("hot-add of an unprogrammed pair")
	}
	if got := a.Pairs(); !slices.Equal(got, []uint32{1, 2}) {
		t.Fatal(got)
	}
}

func TestFileStateSurvives(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a.log")
	a, err := Open("x", path)
	if err != nil {
		t.Fatal(err)
	}
	for id := uint32(1); id <= 3; id++ {
		a.ProgramPair(ctx, manager.Pair{ID: id, Allocation: "a"})
		a.HotAdd(ctx, manager.Pair{ID: id})
	}
	a.HotRemove(ctx, manager.Pair{ID: 2})
	a.RemovePair(ctx, manager.Pair{ID: 3})
	a.Close()
	// A record cut short by a kill is ignored.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`P {"id":7,"alloc`)
	f.Close()
	b, err := Open("x", path)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Pairs(); !slices.Equal(got, []uint32{1, 2}) {
		t.Fatalf("pairs %v", got)
	}
	// Records written after the cut one are kept.
	b.ProgramPair(ctx, manager.Pair{ID: 8, Allocation: "a"})
	b.Close()
	b, err = Open("x", path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := b.Pairs(); !slices.Equal(got, []uint32{1, 2, 8}) {
		t.Fatalf("pairs after reopen %v", got)
	}
	if got := b.HotAdded(); !slices.Equal(got, []uint32{1}) {
		t.Fatalf("hot %v", got)
	}
}
