// Package keylog writes the key log of `dxpu bridge --key-log` and
// `dxpu bridge agent --key-log`: one line per traffic secret a keyed
// bridge derives (seal.Secret.AppendLine), which `dxpu pcap unseal` opens
// captures of the pair with, as SSLKEYLOGFILE does for TLS.
package keylog

import (
	"log/slog"
	"os"
	"sync"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/fabric/secretfile"
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

// Open opens path for appending (--key-log), creating it with mode 0600
// (O_CREAT|O_EXCL) when there is none. An existing file is appended to
// only if it is a regular file, not a symbolic link, owned by this
// process's user and of mode 0600 or stricter (secretfile.Append): the
// secrets in it open the pair's frames, and a file someone else owns or
// may read (an empty one planted in a shared directory, a link to one, a
// FIFO they read) would hand them over. Errors are one line naming
// --key-log and the path.
func Open(path string, log *slog.Logger) (*File, error) {
	f, err := secretfile.Append("--key-log", path)
	if err != nil {
		return nil, err
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
