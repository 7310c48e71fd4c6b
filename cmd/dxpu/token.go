package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// createTokenFile writes a fresh bearer token, 32 random bytes in hex, to
// a new file only its owner can read. An existing file is left alone and
// refused: overwriting it would lock out every client that has it.
func createTokenFile(path string) error {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("--init-token: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("--init-token: %s exists already; remove it or drop --init-token", path)
	}
	if err != nil {
		return fmt.Errorf("--init-token: %w", err)
	}
	_, err = f.WriteString(hex.EncodeToString(b[:]) + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("--init-token: %s: %w", path, err)
	}
	return nil
}
