package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Sentinel errors.
var (
	ErrNotFound  = errors.New("store: key not found")
	ErrNotLeader = errors.New("store: not the leader")
	ErrClosed    = errors.New("store: closed")
	// ErrLocked: another process (another manager) holds the bbolt file.
	ErrLocked = errors.New("store: file locked by another process")
)

// KV is one key and its value.
type KV struct {
	Key   string
	Value []byte
}

// Op is one write of a batch: a put, or a delete when Delete is set.
type Op struct {
	Key    string
	Value  []byte
	Delete bool
}

// Put returns a put operation.
func Put(key string, value []byte) Op { return Op{Key: key, Value: value} }

// Delete returns a delete operation.
func Delete(key string) Op { return Op{Key: key, Delete: true} }

// Store is a key-value store with atomic batches.
type Store interface {
	// Get returns the value of key, or ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	// List returns every key with the prefix, sorted by key.
	List(ctx context.Context, prefix string) ([]KV, error)
	// Apply performs the operations atomically.
	Apply(ctx context.Context, ops ...Op) error
	Close() error
}

// Elector is implemented by stores that several managers share. Only the
// leader may write.
type Elector interface {
	// Campaign blocks until this manager (named id, usually its advertised
	// URL) leads, and returns a channel closed when leadership is lost.
	Campaign(ctx context.Context, id string) (lost <-chan struct{}, err error)
	// Resign gives up leadership at once, so a standby takes over without
	// waiting for the lease to expire.
	Resign(ctx context.Context) error
	// Leader returns the id of the current leader, or ErrNotFound.
	Leader(ctx context.Context) (string, error)
}

// Memory is a Store in memory, for tests and the in-process demo.
type Memory struct {
	mu     sync.Mutex
	m      map[string][]byte
	closed bool
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory { return &Memory{m: map[string][]byte{}} }

func (s *Memory) Get(_ context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	v, ok := s.m[key]
	if !ok {
		return nil, ErrNotFound
	}
	return slices.Clone(v), nil
}

func (s *Memory) List(_ context.Context, prefix string) ([]KV, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	var out []KV
	for k, v := range s.m {
		if strings.HasPrefix(k, prefix) {
			out = append(out, KV{k, slices.Clone(v)})
		}
	}
	slices.SortFunc(out, func(a, b KV) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

func (s *Memory) Apply(_ context.Context, ops ...Op) error {
	if err := checkOps(ops); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	for _, op := range ops {
		if op.Delete {
			delete(s.m, op.Key)
		} else {
			s.m[op.Key] = slices.Clone(op.Value)
		}
	}
	return nil
}

func (s *Memory) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

func checkOps(ops []Op) error {
	for i, op := range ops {
		if op.Key == "" {
			return fmt.Errorf("store: op %d: empty key", i)
		}
	}
	return nil
}
