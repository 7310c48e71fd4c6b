// Package cpuset pins a daemon to a set of CPUs (`dxpu bridge --cpus`): a
// core per pair is how a bridge box keeps its pairs from taking each other's
// cycles, and how `dxpu bench scale --pin` measures whether that pays.
//
// A set is written in the Linux list format of taskset -c and
// /sys/devices/system/cpu/online: CPU numbers and inclusive ranges joined by
// commas, "3", "0-3", "0-1,8,10-11".
package cpuset

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Set is a sorted list of distinct CPU numbers.
type Set []int

// MaxCPU bounds the CPU numbers a set takes (the kernel's cpu_set_t).
const MaxCPU = 1023

// ErrSyntax is returned for a list that does not parse.
var ErrSyntax = errors.New("cpuset: bad CPU list")

// Parse reads a CPU list such as "0-1,4". The error names the part that is
// wrong.
func Parse(s string) (Set, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%w: empty", ErrSyntax)
	}
	var set Set
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := cpuNumber(lo)
		if err != nil {
			return nil, fmt.Errorf("%w: %q in %q: %v", ErrSyntax, part, s, err)
		}
		b := a
		if isRange {
			if b, err = cpuNumber(hi); err != nil {
				return nil, fmt.Errorf("%w: %q in %q: %v", ErrSyntax, part, s, err)
			}
			if b < a {
				return nil, fmt.Errorf("%w: range %q in %q runs backwards", ErrSyntax, part, s)
			}
		}
		for c := a; c <= b; c++ {
			set = append(set, c)
		}
	}
	slices.Sort(set)
	return slices.Compact(set), nil
}

func cpuNumber(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a CPU number", s)
	}
	if n > MaxCPU {
		return 0, fmt.Errorf("CPU %d is above %d", n, MaxCPU)
	}
	return n, nil
}

// String writes the set in the list format, ranges folded: "0-2,5".
func (s Set) String() string {
	var b strings.Builder
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(s[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(s[j]))
		}
		i = j + 1
	}
	return b.String()
}

func (s Set) mask() unix.CPUSet {
	var m unix.CPUSet
	for _, c := range s {
		m.Set(c)
	}
	return m
}

// Pin moves every thread of this process onto s and sets GOMAXPROCS to its
// size. The threads Go starts later are cloned from pinned ones and inherit
// the mask; a thread started while Pin walks the list is caught by the next
// pass. A CPU this process may not use (offline, or outside its cgroup) is
// an error that names it.
func Pin(s Set) error {
	if len(s) == 0 {
		return fmt.Errorf("%w: empty", ErrSyntax)
	}
	if err := Check(s); err != nil {
		return err
	}
	want := s.mask()
	// A thread the walk misses was cloned from one not yet pinned; each
	// pass pins what the last one missed, and one that changes nothing
	// ends it.
	for pass := 0; pass < 16; pass++ {
		changed, err := pinThreads(&want, s)
		if err != nil {
			return err
		}
		if !changed {
			runtime.GOMAXPROCS(len(s))
			return nil
		}
	}
	return fmt.Errorf("cpuset: threads kept starting while pinning to %v", s)
}

// pinThreads sets want on every thread of /proc/self/task that lacks it
// and reports whether any did.
func pinThreads(want *unix.CPUSet, s Set) (bool, error) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return false, fmt.Errorf("cpuset: listing this process's threads: %w", err)
	}
	changed := false
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		var have unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &have); err == nil && have == *want {
			continue
		}
		switch err := unix.SchedSetaffinity(tid, want); {
		case errors.Is(err, unix.ESRCH):
			// The thread exited meanwhile.
		case errors.Is(err, unix.EINVAL):
			return false, fmt.Errorf("cpuset: CPUs %v: none of them is online and allowed to this process (allowed: %v)", s, Allowed())
		case err != nil:
			return false, fmt.Errorf("cpuset: pinning thread %d to CPUs %v: %w", tid, s, err)
		default:
			changed = true
		}
	}
	return changed, nil
}

// Allowed returns the CPUs this thread may run on now.
func Allowed() Set {
	var m unix.CPUSet
	if err := unix.SchedGetaffinity(0, &m); err != nil {
		return nil
	}
	var s Set
	for c := 0; c <= MaxCPU; c++ {
		if m.IsSet(c) {
			s = append(s, c)
		}
	}
	return s
}

// Check reports a CPU of s that this process may not run on, before any
// thread moves: the kernel accepts a mask with at least one usable CPU and
// silently leaves out the rest, which would pin a pair to fewer cores than
// asked.
func Check(s Set) error {
	allowed := Allowed()
	for _, c := range s {
		if _, ok := slices.BinarySearch(allowed, c); !ok {
			return fmt.Errorf("cpuset: CPU %d is not one this process may run on (allowed: %v)", c, allowed)
		}
	}
	return nil
}
