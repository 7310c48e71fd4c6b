package vm

import (
	"os"
	"syscall"
	"testing"
)

// writeExecutable writes a program for a test to run. It holds
// syscall.ForkLock while the file is open for writing: a process forked by
// a parallel test in that window would inherit the write descriptor until
// its exec, and running the file then fails with "text file busy" (ETXTBSY,
// golang/go#22315; CI saw it once in TestCheckQEMU).
func writeExecutable(t *testing.T, path string, body []byte) {
	t.Helper()
	syscall.ForkLock.Lock()
	err := os.WriteFile(path, body, 0o755)
	syscall.ForkLock.Unlock()
	if err != nil {
		t.Fatal(err)
	}
}
