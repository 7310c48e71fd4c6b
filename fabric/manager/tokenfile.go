package manager

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// ErrTokenFileMode: a token file that group or others may read or write.
var ErrTokenFileMode = errors.New("token file is accessible to group or others")

// TokenBytes is the entropy of every token the manager makes: 256 bits.
const TokenBytes = 32

// NewToken returns a fresh random token (TokenBytes from crypto/rand, hex).
func NewToken() (string, error) {
	b := make([]byte, TokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("manager: reading randomness for a token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// LoadTokenFile reads a bearer token (admin, read-only or an agent's
// credential) from path. The file must be a regular file of mode 0600 or
// stricter: a token others can read is no secret. The token is the file's
// one word; surrounding white space is dropped.
func LoadTokenFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("manager: token file: %w", err)
	}
	defer f.Close()
	// Stat the opened file, not the path, so a swap between the check and
	// the read cannot slip another file in.
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("manager: token file %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("manager: token file %s is not a regular file (%v)", path, fi.Mode().Type())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("%w: %s has mode %#o; it must be 0600 or stricter (chmod 600 %s)", ErrTokenFileMode, path, perm, path)
	}
	b := make([]byte, 4096)
	n, err := io.ReadFull(f, b)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF { // EOF: shorter than b, as a token is
		return "", fmt.Errorf("manager: token file %s: %w", path, err)
	}
	if n == len(b) {
		return "", fmt.Errorf("manager: token file %s is larger than %d bytes; it should hold one token", path, len(b)-1)
	}
	tok := strings.TrimSpace(string(b[:n]))
	if tok == "" {
		return "", fmt.Errorf("manager: token file %s is empty: expected one token, a word such as the 64 hex digits dxpu writes", path)
	}
	if strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("manager: token file %s: the token must be one word", path)
	}
	return tok, nil
}

// CreateTokenFile writes a fresh token (NewToken) to a new file of mode
// 0600 at path and returns it; it refuses to replace an existing file (the
// error wraps fs.ErrExist), so a token in use is never lost by accident.
func CreateTokenFile(path string) (string, error) {
	tok, err := NewToken()
	if err != nil {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("manager: creating token file: %w", err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		os.Remove(path)
		return "", fmt.Errorf("manager: writing token file %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return "", fmt.Errorf("manager: writing token file %s: %w", path, err)
	}
	return tok, nil
}
