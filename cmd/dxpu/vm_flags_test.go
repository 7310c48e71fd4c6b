package main

import "testing"

// TestVMKernelChecked: a --kernel or --busybox that is not a file is
// refused before QEMU starts (it failed later as a QMP connection reset).
func TestVMKernelChecked(t *testing.T) {
	t.Parallel()
	gpu := []string{"--gpu", "pair=1,listen=127.0.0.1:9,peer=127.0.0.1:10"}
	checkUsageError(t, append([]string{"vm", "run", "--kernel", "/nonexistent/vmlinuz"}, gpu...), "dxpu: --kernel: stat /nonexistent/vmlinuz: no such file or directory")
	checkUsageError(t, append([]string{"vm", "run", "--busybox", t.TempDir()}, gpu...), "--busybox")
	checkUsageError(t, []string{"vm", "demo", "--loopback", "--kernel", t.TempDir()}, "not a regular file")
}
