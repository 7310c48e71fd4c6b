package manager

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"

	"github.com/dxpu/dxpu/fabric/oneline"
	"github.com/dxpu/dxpu/fabric/secretfile"
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

// LoadTokenFile is LoadTokenFileFor with "token file" for the flag.
func LoadTokenFile(path string) (string, error) { return LoadTokenFileFor("token file", path) }

// LoadTokenFileFor reads a bearer token (admin, read-only or an agent's
// credential) from path, which flag (e.g. "--token-file") named; errors
// are one line naming both. The file is opened by secretfile.Open: a
// regular file, not a symbolic link, owned by this process's user and of
// mode 0600 or stricter (a mode that lets others at it wraps
// ErrTokenFileMode). A token someone else owns or can read is no secret: it
// may be theirs. The token is the file's one word; surrounding white space
// is dropped.
func LoadTokenFileFor(flag, path string) (string, error) {
	f, err := secretfile.Open(flag, path)
	if err != nil {
		if errors.Is(err, secretfile.ErrMode) {
			return "", modeError{err}
		}
		return "", err
	}
	defer f.Close()
	b := make([]byte, 4096)
	n, err := io.ReadFull(f, b)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF { // EOF: shorter than b, as a token is
		return "", fmt.Errorf("%s %s: %w", flag, oneline.Name(path), err)
	}
	if n == len(b) {
		return "", fmt.Errorf("%s %s is larger than %d bytes; it should hold one token", flag, oneline.Name(path), len(b)-1)
	}
	tok := strings.TrimSpace(string(b[:n]))
	if tok == "" {
		return "", fmt.Errorf("%s %s is empty: expected one token, a word such as the 64 hex digits dxpu writes", flag, oneline.Name(path))
	}
	if strings.IndexFunc(tok, unicode.IsSpace) >= 0 { // what TrimSpace drops, \f and \v too
		return "", fmt.Errorf("%s %s: the token must be one word", flag, oneline.Name(path))
	}
	if err := CheckToken(tok); err != nil {
		return "", fmt.Errorf("%s %s: %w", flag, oneline.Name(path), err)
	}
	return tok, nil
}

// ErrTokenChars: a token holds a byte an HTTP Authorization header cannot
// carry, so no client could ever send it.
var ErrTokenChars = errors.New("a token is printable ASCII")

// CheckToken refuses a token (from a file, or $DXPU_TOKEN) holding a byte
// other than printable ASCII, naming the first one and where it is.
func CheckToken(tok string) error {
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("byte %#02x at offset %d: %w (it goes in an HTTP Authorization header)", c, i, ErrTokenChars)
		}
	}
	return nil
}

// modeError is secretfile's refusal of the mode, also ErrTokenFileMode.
type modeError struct{ err error }

func (e modeError) Error() string   { return e.err.Error() }
func (e modeError) Unwrap() []error { return []error{e.err, ErrTokenFileMode} }

// CreateTokenFile is CreateTokenFileFor with "token file" for the flag.
func CreateTokenFile(path string) (string, error) { return CreateTokenFileFor("token file", path) }

// CreateTokenFileFor writes a fresh token (NewToken) to a new file of mode
// 0600 at path (secretfile.Create: O_CREAT|O_EXCL, never through a link)
// and returns it; it refuses to replace an existing file (the error wraps
// fs.ErrExist), so a token in use is never lost by accident.
func CreateTokenFileFor(flag, path string) (string, error) {
	tok, err := NewToken()
	if err != nil {
		return "", err
	}
	f, err := secretfile.Create(flag, path)
	if err != nil {
		return "", err
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		os.Remove(path)
		return "", fmt.Errorf("%s %s: writing the token: %w", flag, path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return "", fmt.Errorf("%s %s: writing the token: %w", flag, path, err)
	}
	return tok, nil
}
