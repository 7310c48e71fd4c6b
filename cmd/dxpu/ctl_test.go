package main

import (
	"errors"
	"strings"
	"testing"
)

// runCtl runs `dxpu ctl ...` in a command tree of its own.
func runCtl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, errb, err := runDxpu(t, "", append([]string{"ctl"}, args...)...)
	return out + errb, err
}

// TestCtlExitCodes: ctl's flags reach the product and its errors map to
// exit status 2 (usage, unreachable manager; internal/app/ctl tests the
// calls themselves).
func TestCtlExitCodes(t *testing.T) {
	t.Parallel()
	var ec exitCodeError
	if _, err := runCtl(t, "alloc", "--host", "h1"); !errors.As(err, &ec) || ec.code != 2 || !strings.Contains(err.Error(), "--count") {
		t.Fatalf("alloc without --count: %v", err)
	}
	if _, err := runCtl(t, "--manager", "not a url", "box"); !errors.As(err, &ec) || ec.code != 2 || !strings.Contains(err.Error(), "not a url") {
		t.Fatalf("bad --manager: %v", err)
	}
}
