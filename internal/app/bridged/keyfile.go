package bridged

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/fabric/oneline"
	"github.com/dxpu/dxpu/fabric/secretfile"
)

// ErrKeyFile is wrapped by every refusal of LoadKeyFile.
var ErrKeyFile = errors.New("pair key file")

// LoadKeyFile is LoadKeyFileFor with "pair key file" for the flag.
func LoadKeyFile(path string) ([]byte, error) { return LoadKeyFileFor("pair key file", path) }

// LoadKeyFileFor reads a pair key: 32 raw bytes, or 64 hex digits (a
// trailing newline allowed) from path, which flag (e.g. "--key-file")
// named. The file is opened by secretfile.Open: a regular file, not a
// symbolic link, owned by this process's user, that only its owner can
// read (mode 0600 or stricter): a key others can read, or chose, is no
// key. Every refusal wraps ErrKeyFile and is one line naming flag and path.
func LoadKeyFileFor(flag, path string) ([]byte, error) {
	f, err := secretfile.Open(flag, path)
	if err != nil {
		return nil, keyError{err}
	}
	defer f.Close()
	bad := func(format string, args ...any) error {
		return keyError{fmt.Errorf("%s %s"+format, append([]any{flag, oneline.Name(path)}, args...)...)}
	}
	b, err := io.ReadAll(io.LimitReader(f, 256))
	if err != nil {
		return nil, bad(": %w", err)
	}
	if len(b) == seal.KeyLen {
		return b, nil
	}
	want := fmt.Sprintf("expected %d raw bytes, or %d hex digits (0-9, a-f) on one line, as 'openssl rand -hex %d' writes", seal.KeyLen, 2*seal.KeyLen, seal.KeyLen)
	t := bytes.TrimSpace(b)
	if len(t) == 0 {
		return nil, bad(" is empty: %s", want)
	}
	// Text of 64 characters is meant as hex: say which character is not.
	if len(t) == 2*seal.KeyLen {
		k := make([]byte, seal.KeyLen)
		_, err := hex.Decode(k, t)
		if err == nil {
			return k, nil
		}
		lead := len(b) - len(bytes.TrimLeft(b, " \t\r\n"))
		var bad2 hex.InvalidByteError
		if errors.As(err, &bad2) {
			i := lead + bytes.IndexByte(t, byte(bad2))
			return nil, bad(": not hex: %q at offset %d; %s", byte(bad2), i, want)
		}
		return nil, bad(": not hex: %w; %s", err, want)
	}
	if isText(t) {
		return nil, bad(": %d characters of text, not %d hex digits; %s", len(t), 2*seal.KeyLen, want)
	}
	return nil, bad(": %d bytes, not %d; %s", len(b), seal.KeyLen, want)
}

// keyError is a refusal of a key file: its own words, also ErrKeyFile.
type keyError struct{ err error }

func (e keyError) Error() string   { return e.err.Error() }
func (e keyError) Unwrap() []error { return []error{ErrKeyFile, e.err} }

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
