package privtest

import (
	"os"
	"testing"
)

// Short skips the test under go test -short, saying why it is long. CI
// does not run -short, so the switches do not apply.
func Short(tb testing.TB, why string) {
	tb.Helper()
	if testing.Short() {
		tb.Skipf("skipping in -short mode: %s", why)
	}
}

// OptIn returns the value of the environment variable env, skipping the
// test when it is unset: for tests that need something CI cannot install
// (why says what and how to provide it). The switches do not apply.
func OptIn(tb testing.TB, env, why string) string {
	tb.Helper()
	v := os.Getenv(env)
	if v == "" {
		tb.Skipf("skipping: %s not set: %s", env, why)
	}
	return v
}
