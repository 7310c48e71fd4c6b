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
	want := fmt.Sprintf("expected %d raw bytes, or %d hex digits (0-9, a-f) on one line, as 'openssl rand -hex %d' writes", seal.KeyLen, 2*seal.KeyLen, seal.KeyLen)
	t := bytes.TrimSpace(b)
	if len(t) == 0 {
		return nil, fmt.Errorf("%w %s is empty: %s", ErrKeyFile, path, want)
	}
	// Text of 64 characters is meant as hex: say which character is not.
	if len(t) == 2*seal.KeyLen {
		k := make([]byte, seal.KeyLen)
		_, err := hex.Decode(k, t)
		if err == nil {
			return k, nil
		}
		lead := len(b) - len(bytes.TrimLeft(b, " \t\r\n"))
		var bad hex.InvalidByteError
		if errors.As(err, &bad) {
			i := lead + bytes.IndexByte(t, byte(bad))
			return nil, fmt.Errorf("%w %s: not hex: %q at offset %d; %s", ErrKeyFile, path, byte(bad), i, want)
		}
		return nil, fmt.Errorf("%w %s: not hex: %w; %s", ErrKeyFile, path, err, want)
	}
	if isText(t) {
		return nil, fmt.Errorf("%w %s: %d characters of text, not %d hex digits; %s", ErrKeyFile, path, len(t), 2*seal.KeyLen, want)
	}
	return nil, fmt.Errorf("%w %s: %d bytes, not %d; %s", ErrKeyFile, path, len(b), seal.KeyLen, want)
}

// isText: printable ASCII only, as a hex key meant to be (raw key bytes
// are random and almost never all printable).
func isText(b []byte) bool {
	for _, c := range b {
		if c < ' ' || c > '~' {
			return false
		}
	}
	return true
}
