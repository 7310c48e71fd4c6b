package main

import (
	"errors"
	"testing"
)

// TestNettlpBadFlags: the flags (the deprecated --tags too) reach the
// product and its usage errors exit with status 2 (internal/app/nettlpcmd
// tests serving, reading and writing).
func TestNettlpBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"nettlp", "serve", "--addr", "127.0.3.2", "--tags", "17"},
		{"nettlp", "serve", "--addr", "127.0.3.2", "--fill", "random"},
		{"nettlp", "read", "--remote", "nope"},
		{"nettlp", "write", "--hex", "c0", "--string", "x"},
	} {
		_, _, err := runDxpu(t, "", args...)
		var ec exitCodeError
		if !errors.As(err, &ec) || ec.code != 2 {
			t.Errorf("%v: %v, want exit code 2", args, err)
		}
	}
}
