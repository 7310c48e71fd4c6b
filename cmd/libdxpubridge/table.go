package main

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/dxpu/dxpu/bridge"
)

// maxBridges is DXPU_MAX_BRIDGES: open bridges at once, so that a caller
// leaking handles in a loop fails instead of exhausting memory.
const maxBridges = 1 << 16

// noTime is the time of a handle no timed call has reached yet.
const noTime = time.Duration(math.MinInt64)

// handle is one bridge and what the ABI keeps beside it. mu serializes
// every call on it; dead is set once freed, broken once a call panicked.
type handle struct {
	mu     sync.Mutex
	b      *bridge.Bridge
	dead   bool
	broken bool
	now    time.Duration // latest time passed in, for DXPU_E_TIME

	// A frame or TLP that did not fit the caller's buffer waits in these
	// (preallocated) buffers for the next call.
	frame  []byte
	frameN int
	tlp    []byte
	tlpN   int

	// The latest failure, for dxpu_bridge_last_error.
	code int
	err  error

	// keys follows a keyed bridge's keys for key events.
	keys keyWatch
}

// table maps handles to bridges. Handles count up from 1 and are never
// reused, so a stale handle can only name nothing.
type table struct {
	mu   sync.RWMutex
	last int64
	m    map[int64]*handle
}

// bridges is the library's one table.
var bridges = &table{m: make(map[int64]*handle)}

// add registers h and returns its handle.
func (t *table) add(h *handle) (int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.m) >= maxBridges {
		return 0, fmt.Errorf("%d bridges open already (DXPU_MAX_BRIDGES): free some", len(t.m))
	}
	t.last++
	t.m[t.last] = h
	return t.last, nil
}

// get returns the handle's bridge, or nil.
func (t *table) get(id int64) *handle {
	t.mu.RLock()
	h := t.m[id]
	t.mu.RUnlock()
	return h
}

// remove unregisters id and returns what it named, or nil.
func (t *table) remove(id int64) *handle {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.m[id]
	delete(t.m, id)
	return h
}

// open returns the number of registered handles.
func (t *table) open() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.m)
}
