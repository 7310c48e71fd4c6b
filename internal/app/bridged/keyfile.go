package bridged

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/dxpu/dxpu/bridge/seal"
)

// ErrKeyFile is wrapped by every refusal of LoadKeyFile.
var ErrKeyFile = errors.New("pair key file")

// LoadKeyFile reads a pair key: 32 raw bytes, or 64 hex digits (a trailing
// newline allowed). The file must be a regular file that only its owner can
// read (mode 0600 or stricter): a key others can read is no key.
func LoadKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrKeyFile, path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w %s: not a regular file", ErrKeyFile, path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%w %s: mode %04o lets others read it; chmod 600 it", ErrKeyFile, path, perm)
	}
	b, err := io.ReadAll(io.LimitReader(f, 256))
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrKeyFile, path, err)
	}
	if len(b) == seal.KeyLen {
		return b, nil
	}
	t := bytes.TrimSpace(b)
	if len(t) == 2*seal.KeyLen {
		k := make([]byte, seal.KeyLen)
		if _, err := hex.Decode(k, t); err == nil {
			return k, nil
		}
	}
	return nil, fmt.Errorf("%w %s: want %d raw bytes or %d hex digits, found %d bytes", ErrKeyFile, path, seal.KeyLen, 2*seal.KeyLen, len(b))
}
