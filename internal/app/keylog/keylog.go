// Package keylog writes the key log of `dxpu bridge --key-log` and
// `dxpu bridge agent --key-log`: one line per traffic secret a keyed
// bridge derives (seal.Secret.AppendLine), which `dxpu pcap unseal` opens
// captures of the pair with, as SSLKEYLOGFILE does for TLS.
package keylog

import (
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/dxpu/dxpu/bridge/seal"
)

// File is an open key log. Its Log method is safe for concurrent use (an
// agent's bridges share one file).
type File struct {
	mu     sync.Mutex
	f      *os.File
	log    *slog.Logger
	failed bool
	buf    []byte
}

// Open opens path for appending, creating it with mode 0600. An existing
// file that group or others may read or write is refused: the secrets in
// it open the pair's frames.
func Open(path string, log *slog.Logger) (*File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--key-log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("--key-log: %w", err)
	}
	if m := st.Mode(); !m.IsRegular() || m.Perm()&0o077 != 0 {
		f.Close()
		return nil, fmt.Errorf("--key-log %s: mode %v, want a regular file only its owner may read and write (0600)", path, m)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &File{f: f, log: log}, nil
}

// Log appends s as one line, written at once so that a line is never
// split or lost in a buffer when the process dies. A write error is
// logged once; later secrets are still tried.
func (k *File) Log(s seal.Secret) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.buf = s.AppendLine(k.buf[:0])
	_, err := k.f.Write(k.buf)
	clear(k.buf)
	if err != nil && !k.failed {
		k.failed = true
		k.log.Error("key log write failed; captures of this pair may not open", "file", k.f.Name(), "err", err)
	}
}

// Close closes the file.
func (k *File) Close() error { return k.f.Close() }
