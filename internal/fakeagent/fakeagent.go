// Package fakeagent is an in-memory GPU bridge, switch and host bridge for
// the manager's tests (fabric/manager and its agentapi; the demo records
// the manager's calls itself). It implements every programmer interface of
// fabric/manager plus PairLister, can be told to fail a given call, can slow
// every call down, and can keep its state in a file so that it outlives a
// manager killed with SIGKILL (as real bridges do).
//
// The state file is a log of lines, replayed on Open:
//
//	P {"id":7,...}   pair 7 programmed (the JSON of manager.Pair)
//	R 7              pair 7 removed
//	H 7              pair 7 hot-added
//	U 7              pair 7 hot-removed (orderly or surprise)
package fakeagent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dxpu/dxpu/fabric/manager"
)

// Op names a call.
type Op string

const (
	OpProgram        Op = "program"
	OpRemove         Op = "remove"
	OpHotAdd         Op = "hot_add"
	OpHotRemove      Op = "hot_remove"
	OpSurpriseRemove Op = "surprise_remove"
	OpList           Op = "list"
)

// ErrInjected is the error of an injected failure.
var ErrInjected = errors.New("fakeagent: injected failure")

// Agent is one fake agent.
type Agent struct {
	Name string

	mu        sync.Mutex
	pairs     map[uint32]manager.Pair
	hot       map[uint32]bool
	calls     map[Op]int
	failAt    map[Op][]int // call numbers (1-based, counted from FailNth) that fail
	failAll   map[Op]bool
	surprises []manager.Pair
	delay     time.Duration
	file      *os.File
}

// New returns an empty in-memory agent.
func New(name string) *Agent {
	return &Agent{Name: name, pairs: map[uint32]manager.Pair{}, hot: map[uint32]bool{},
		calls: map[Op]int{}, failAt: map[Op][]int{}, failAll: map[Op]bool{}}
}

// Open returns an agent whose state is replayed from, and appended to, the
// file at path (created if missing).
func Open(name, path string) (*Agent, error) {
	a := New(name)
	b, err := os.ReadFile(path)
	if err == nil {
		if err := a.replay(string(b)); err != nil {
			return nil, fmt.Errorf("fakeagent %s: %s: %w", name, path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		f.WriteString("\n") // end a record cut short by a kill
	}
	a.file = f
	return a, nil
}

func (a *Agent) replay(s string) error {
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" {
			continue
		}
		kind, rest, _ := strings.Cut(line, " ")
		if kind == "P" {
			var p manager.Pair
			if err := json.Unmarshal([]byte(rest), &p); err != nil {
				// A line cut short by a kill is the last one; ignore it.
				continue
			}
			a.pairs[p.ID] = p
			continue
		}
		id, err := strconv.ParseUint(rest, 10, 32)
		if err != nil {
			continue
		}
		switch kind {
		case "R":
			delete(a.pairs, uint32(id))
			delete(a.hot, uint32(id))
		case "H":
			a.hot[uint32(id)] = true
		case "U":
			delete(a.hot, uint32(id))
		default:
			return fmt.Errorf("line %d: unknown record %q", n, kind)
		}
	}
	return sc.Err()
}

func (a *Agent) record(line string) {
	if a.file != nil {
		a.file.WriteString(line + "\n")
	}
}

// Close closes the state file.
func (a *Agent) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.file == nil {
		return nil
	}
	return a.file.Close()
}

// SetDelay makes every call take d (or until its context ends).
func (a *Agent) SetDelay(d time.Duration) {
	a.mu.Lock()
	a.delay = d
	a.mu.Unlock()
}

// FailNth makes the nth call of op from now fail (1 is the next call).
func (a *Agent) FailNth(op Op, n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failAt[op] = append(a.failAt[op], a.calls[op]+n)
}

// FailAlways makes every call of op fail (on) or succeed again (off).
func (a *Agent) FailAlways(op Op, on bool) {
	a.mu.Lock()
	a.failAll[op] = on
	a.mu.Unlock()
}

// Calls returns how many times op was called.
func (a *Agent) Calls(op Op) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls[op]
}

// Pairs returns the IDs of the programmed pairs, sorted.
func (a *Agent) Pairs() []uint32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return sortedKeys(a.pairs)
}

// HotAdded returns the IDs of the hot-added pairs, sorted.
func (a *Agent) HotAdded() []uint32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return sortedKeys(a.hot)
}

// Surprises returns the pairs that got a surprise removal.
func (a *Agent) Surprises() []manager.Pair {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.surprises)
}

func sortedKeys[V any](m map[uint32]V) []uint32 {
	out := make([]uint32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// enter counts the call, waits the delay and decides on failure.
func (a *Agent) enter(ctx context.Context, op Op) error {
	a.mu.Lock()
	a.calls[op]++
	n := a.calls[op]
	fail := a.failAll[op]
	if i := slices.Index(a.failAt[op], n); i >= 0 {
		fail = true
		a.failAt[op] = slices.Delete(a.failAt[op], i, i+1)
	}
	d := a.delay
	a.mu.Unlock()
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail {
		return fmt.Errorf("%w: %s %s call %d", ErrInjected, a.Name, op, n)
	}
	return nil
}

func (a *Agent) ProgramPair(ctx context.Context, p manager.Pair) error {
	if err := a.enter(ctx, OpProgram); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if old, ok := a.pairs[p.ID]; ok && old.Allocation != p.Allocation {
		return fmt.Errorf("fakeagent %s: pair %d already programmed for allocation %s", a.Name, p.ID, old.Allocation)
	}
	a.pairs[p.ID] = p
	b, _ := json.Marshal(p)
	a.record("P " + string(b))
	return nil
}

func (a *Agent) RemovePair(ctx context.Context, p manager.Pair) error {
	if err := a.enter(ctx, OpRemove); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.pairs[p.ID]; ok {
		delete(a.pairs, p.ID)
		delete(a.hot, p.ID)
		a.record("R " + strconv.FormatUint(uint64(p.ID), 10))
	}
	return nil
}

func (a *Agent) HotAdd(ctx context.Context, p manager.Pair) error {
	if err := a.enter(ctx, OpHotAdd); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.pairs[p.ID]; !ok {
		return fmt.Errorf("fakeagent %s: hot-add of pair %d that is not programmed", a.Name, p.ID)
	}
	a.hot[p.ID] = true
	a.record("H " + strconv.FormatUint(uint64(p.ID), 10))
	return nil
}

func (a *Agent) HotRemove(ctx context.Context, p manager.Pair) error {
	if err := a.enter(ctx, OpHotRemove); err != nil {
		return err
	}
	a.unplug(p.ID)
	return nil
}

func (a *Agent) SurpriseRemove(ctx context.Context, p manager.Pair) error {
	if err := a.enter(ctx, OpSurpriseRemove); err != nil {
		return err
	}
	a.mu.Lock()
	a.surprises = append(a.surprises, p)
	a.mu.Unlock()
	a.unplug(p.ID)
	return nil
}

func (a *Agent) unplug(id uint32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.hot[id] {
		delete(a.hot, id)
		a.record("U " + strconv.FormatUint(uint64(id), 10))
	}
}

// ListPairs implements manager.PairLister.
func (a *Agent) ListPairs(ctx context.Context) ([]manager.Pair, error) {
	if err := a.enter(ctx, OpList); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]manager.Pair, 0, len(a.pairs))
	for _, id := range sortedKeys(a.pairs) {
		out = append(out, a.pairs[id])
	}
	return out, nil
}
