package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/dxpu/dxpu/sim"
)

var bucket = []byte("dxpu")

// Bolt is a Store in one bbolt file. bbolt locks the file, so at most one
// manager opens it at a time.
type Bolt struct {
	db *bolt.DB
}

// OpenBolt opens or creates the store file at path. It waits up to timeout
// for another process to release the file lock, then fails with ErrLocked
// (bbolt itself says only "timeout"). A damaged file (CheckBoltFile, or
// bbolt failing on it while opening) fails with ErrDamaged.
func OpenBolt(path string, timeout time.Duration) (_ *Bolt, err error) {
	if err := CheckBoltFile(path); err != nil {
		return nil, err
	}
	// Damage CheckBoltFile does not see (deeper pages) makes bbolt panic,
	// or fault on its mapping, while it opens the file here: report it.
	var db *bolt.DB
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			if db != nil {
				closeQuietly(db)
			}
			err = damagedFile(path, damagedError(fmt.Sprintf("bbolt failed reading it: %v", p)))
		}
	}()
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s is held by another process, most likely another manager (waited %s); stop it or give this one another --store", ErrLocked, path, sim.FormatDuration(timeout))
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && pe.Path == path {
			// The system's error names the file already.
			return nil, fmt.Errorf("store: %w", err)
		}
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucket)
		return err
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: %s: %w", path, err)
	}
	db.MaxBatchDelay = 2 * time.Millisecond
	return &Bolt{db: db}, nil
}

func (s *Bolt) Get(_ context.Context, key string) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucket).Get([]byte(key))
		if v == nil {
			return ErrNotFound
		}
		out = bytes.Clone(v)
		return nil
	})
	return out, err
}

func (s *Bolt) List(_ context.Context, prefix string) ([]KV, error) {
	var out []KV
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucket).Cursor()
		p := []byte(prefix)
		for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			out = append(out, KV{string(k), bytes.Clone(v)})
		}
		return nil
	})
	return out, err
}

func (s *Bolt) Apply(_ context.Context, ops ...Op) error {
	if err := checkOps(ops); err != nil {
		return err
	}
	// Batch lets concurrent Apply calls share one transaction and one
	// fsync; the function may run again if a batch is retried, which is
	// harmless for puts and deletes.
	return s.db.Batch(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		for _, op := range ops {
			var err error
			if op.Delete {
				err = b.Delete([]byte(op.Key))
			} else {
				err = b.Put([]byte(op.Key), op.Value)
			}
			if err != nil {
				return fmt.Errorf("store: %s: %w", op.Key, err)
			}
		}
		return nil
	})
}

func (s *Bolt) Close() error { return s.db.Close() }

// closeQuietly closes a db that failed while opening: it may fail again.
func closeQuietly(db *bolt.DB) {
	defer func() { recover() }()
	db.Close()
}
