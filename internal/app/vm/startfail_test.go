package vm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartFailureQuotesQEMU: a QEMU that exits at start-up (as one whose
// KVM cannot run the guest: "failed to set MSR", then an assertion) fails
// Start with its own error line and, under KVM, the way around it, not
// with the QMP socket's "connection reset"; the serial log the error
// names is still there after Start cleaned up its temporary directory.
func TestStartFailureQuotesQEMU(t *testing.T) { // not parallel: it sets TMPDIR
	dir := t.TempDir()
	q := filepath.Join(dir, "qemu")
	writeExecutable(t, q, []byte(`#!/bin/sh
case "$*" in *"-device help"*) echo '"x-pci-proxy-dev"'; exit 0;; esac
echo "qemu-system-x86_64: warning: host doesn't support requested feature" >&2
echo "qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69" >&2
echo "qemu-system-x86_64: ../../target/i386/kvm/kvm.c:3183: kvm_buf_set_msrs: Assertion failed." >&2
exit 134
`))
	self := fakeELF(t, false)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	_, err := Start(context.Background(), Options{QEMU: q, Kernel: self, Busybox: self, GuestTool: self, Accel: "kvm"})
	if err == nil {
		t.Fatal("started")
	}
	msg := err.Error()
	if !strings.Contains(msg, "failed to set MSR 0x10a to 0x69") || !strings.Contains(msg, "--accel tcg") || strings.Count(msg, "\n") > 0 {
		t.Errorf("error %q: want QEMU's error line and --accel tcg, on one line", msg)
	}
	_, logPath, ok := strings.Cut(msg, "(serial log ")
	logPath = strings.TrimSuffix(logPath, ")")
	if !ok || !strings.HasPrefix(logPath, tmp) {
		t.Fatalf("error %q names no serial log in the temporary directory %s", msg, tmp)
	}
	if b, err := os.ReadFile(logPath); err != nil || !strings.Contains(string(b), "failed to set MSR") {
		t.Errorf("serial log after Start failed: %v %q", err, b)
	}
	left, _ := os.ReadDir(filepath.Dir(logPath))
	if len(left) != 1 {
		t.Errorf("the temporary directory keeps %d entries, want the log alone", len(left))
	}
}
