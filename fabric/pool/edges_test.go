package pool

import (
	"errors"
	"slices"
	"testing"
)

// Edge cases the other tests leave open: each test here pins a boundary
// that a one-character change of the code would move without another test
// noticing.

// TestMinMemoryBoundaryInclusive: MinMemoryMiB is a floor a GPU may sit
// on, in a homogeneous box (matched per box) and in a mixed one (matched
// per GPU).
func TestMinMemoryBoundaryInclusive(t *testing.T) {
	t.Parallel()
	const mem = 80 << 10
	mixed := box("mixed", "p", "r", 4, "H100", mem)
	mixed.GPUs[3].MemoryMiB = mem / 2
	for _, b := range []Box{box("same", "p", "r", 4, "H100", mem), mixed} {
		for _, c := range []struct {
			min  uint64
			want error
		}{
			{mem - 1, nil},
			{mem, nil},
			{mem + 1, ErrInsufficient},
		} {
			p := New()
			mustAdd(t, p, b, host("h", "p", "r"))
			a, err := p.Reserve("a", Request{Host: "h", Count: 3, MinMemoryMiB: c.min})
			if !errors.Is(err, c.want) {
				t.Fatalf("box %s of %d MiB GPUs, min_memory_mib %d: %v, want %v", b.ID, uint64(mem), c.min, err, c.want)
			}
			if err == nil && len(a.GPUs) != 3 {
				t.Fatalf("box %s, min_memory_mib %d: %d GPUs", b.ID, c.min, len(a.GPUs))
			}
			check(t, p)
		}
	}
}

// TestPairIDsContinueAfterRestoreAndWrap: after a Restore, new pair IDs
// continue above the highest restored one (an ID is reused as late as
// possible), up to and including MaxPairID, then wrap to 1.
func TestPairIDsContinueAfterRestoreAndWrap(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		restored uint32
		want     []uint32
	}{
		{7, []uint32{8, 9, 10}},
		{MaxPairID - 2, []uint32{MaxPairID - 1, MaxPairID, 1}},
		{MaxPairID, []uint32{1, 2, 3}},
	} {
		p := New()
		mustAdd(t, p, box("b", "p", "r", 8, "A100", 40<<10), host("h", "p", "r"))
		if err := p.Restore(Allocation{ID: "old", Host: "h", State: StateActive,
			GPUs: []Assignment{{GPU: "b-g7", Box: "b", Pair: c.restored, HostPort: 5}}}); err != nil {
			t.Fatal(err)
		}
		a, err := p.Reserve("new", Request{Host: "h", Count: 3})
		if err != nil {
			t.Fatal(err)
		}
		var got []uint32
		for _, g := range a.GPUs {
			got = append(got, g.Pair)
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(c.want))
		if !slices.Equal(got, want) {
			t.Errorf("restored pair %d: new pairs %v, want %v", c.restored, got, want)
		}
		check(t, p)
	}
}

// TestAllocationStateTransitions: an allocation goes pending -> active ->
// releasing (or pending -> releasing); nothing goes back to active, and a
// refused transition changes nothing.
func TestAllocationStateTransitions(t *testing.T) {
	t.Parallel()
	p := New()
	mustAdd(t, p, box("b", "p", "r", 4, "A100", 40<<10), host("h", "p", "r"))
	if _, err := p.Reserve("a", Request{Host: "h", Count: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Reserve("b", Request{Host: "h", Count: 1}); err != nil {
		t.Fatal(err)
	}
	step := func(name string, f func(string) (Allocation, error), id string, want error, state State) {
		t.Helper()
		a, err := f(id)
		if !errors.Is(err, want) {
			t.Fatalf("%s %s: %v, want %v", name, id, err, want)
		}
		if got, _ := p.Allocation(id); got.State != state || (err == nil && a.State != state) {
			t.Fatalf("%s %s: state %s (returned %s), want %s", name, id, got.State, a.State, state)
		}
	}
	step("Activate", p.Activate, "a", nil, StateActive)
	step("Activate", p.Activate, "a", ErrConflict, StateActive)
	step("BeginRelease", p.BeginRelease, "a", nil, StateReleasing)
	step("BeginRelease", p.BeginRelease, "a", nil, StateReleasing)
	step("Activate", p.Activate, "a", ErrConflict, StateReleasing)
	step("BeginRelease", p.BeginRelease, "b", nil, StateReleasing)
	step("Activate", p.Activate, "b", ErrConflict, StateReleasing)
	if _, err := p.Activate("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Activate of an unknown allocation: %v", err)
	}
	check(t, p)
}

// TestHostPortsCannotShrinkBelowAUsedPort: a host re-registration may drop
// ports above every port in use, down to the highest used port + 1, and no
// further.
func TestHostPortsCannotShrinkBelowAUsedPort(t *testing.T) {
	t.Parallel()
	p := New()
	h := host("h", "p", "r")
	h.Ports = 40
	mustAdd(t, p, box("b", "p", "r", 2, "A100", 40<<10), h)
	if err := p.Restore(Allocation{ID: "a", Host: "h", State: StateActive,
		GPUs: []Assignment{{GPU: "b-g0", Box: "b", Pair: 1, HostPort: 32}}}); err != nil {
		t.Fatal(err)
	}
	before := snapshot(p)
	h.Ports = 32
	if _, err := p.AddHost(h); !errors.Is(err, ErrInUse) {
		t.Fatalf("shrinking to 32 ports with port 32 in use: %v, want ErrInUse", err)
	}
	if snapshot(p) != before {
		t.Fatal("a refused re-registration changed the pool")
	}
	h.Ports = 33
	got, err := p.AddHost(h)
	if err != nil {
		t.Fatalf("shrinking to 33 ports with port 32 in use: %v", err)
	}
	if got.Ports != 33 || got.UsedPorts != 1 {
		t.Fatalf("host %+v, want 33 ports, 1 used", got)
	}
	check(t, p)
}

// TestHostReRegistrationKeepsUsedPorts: re-registering a host that holds
// GPUs keeps its used ports and their count, and new allocations get
// other ports.
func TestHostReRegistrationKeepsUsedPorts(t *testing.T) {
	t.Parallel()
	p := New()
	h := host("h", "p", "r")
	mustAdd(t, p, box("b", "p", "r", 8, "A100", 40<<10), h)
	a, err := p.Reserve("a", Request{Host: "h", Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	h.Ports = 64
	got, err := p.AddHost(h)
	if err != nil {
		t.Fatal(err)
	}
	if got.UsedPorts != 3 {
		t.Fatalf("after re-registration %d ports used, want 3", got.UsedPorts)
	}
	if hh, _ := p.Host("h"); hh.UsedPorts != 3 || hh.Ports != 64 {
		t.Fatalf("Host: %+v", hh)
	}
	check(t, p)
	b, err := p.Reserve("b", Request{Host: "h", Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range b.GPUs {
		for _, y := range a.GPUs {
			if x.HostPort == y.HostPort {
				t.Fatalf("host port %d given to both allocations", x.HostPort)
			}
		}
	}
	if _, err := p.Remove("a"); err != nil {
		t.Fatal(err)
	}
	if hh, _ := p.Host("h"); hh.UsedPorts != 2 {
		t.Fatalf("after removing a: %d ports used, want 2", hh.UsedPorts)
	}
	check(t, p)
}

// TestHostPortCountBounds: a host bridge exposes MinHostPorts to 65536
// virtual ports.
func TestHostPortCountBounds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		ports int
		ok    bool
	}{{MinHostPorts - 1, false}, {MinHostPorts, true}, {1 << 16, true}, {1<<16 + 1, false}, {-1, false}} {
		h := host("h", "p", "r")
		h.Ports = c.ports
		err := h.Validate()
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("%d ports: %v, want ok %v", c.ports, err, c.ok)
		}
		if _, err := New().AddHost(h); c.ok != (err == nil) {
			t.Errorf("AddHost with %d ports: %v, want ok %v", c.ports, err, c.ok)
		}
	}
}
