package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVMFlags: bad settings are usage errors before QEMU is looked for
// (internal/app/vm tests each bad --gpu spec).
func TestVMFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"vm", "demo", "--memory-mb", "64"}, "--memory-mb"},
		{[]string{"vm", "demo", "--machine", "virt"}, "--machine"},
		{[]string{"vm", "demo", "--accel", "hvf"}, "--accel"},
		{[]string{"vm", "demo", "--loss", "1.5"}, "--loss"},
		{[]string{"vm", "demo", "--bytes", "0"}, "--bytes"},
		{[]string{"vm", "run"}, "at least one --gpu"},
		{[]string{"vm", "run", "--gpu", "pair=1,listen=127.0.0.1:1"}, "all needed"},
	} {
		_, _, err := runDxpu(t, "", tc.args...)
		var ec exitCodeError
		if !errors.As(err, &ec) || ec.code != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want exit 2 mentioning %q", tc.args, err, tc.want)
		}
	}
}

// TestVMFailurePrintsNoResult: a vm run or demo that fails prints its
// error and no result object (vm run once printed an all-zero report
// before its error); --dir names a directory that does not exist yet, as
// in the report, and is not created before QEMU is found.
func TestVMFailurePrintsNoResult(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "missing")
	qemu := filepath.Join(t.TempDir(), "no-qemu-here")
	for _, args := range [][]string{
		{"vm", "run", "--qemu", qemu, "--dir", dir, "--insecure-no-keys", "--gpu", "pair=1,listen=127.0.0.1:0,peer=127.0.0.1:9"},
		{"vm", "demo", "--loopback", "--qemu", qemu, "--dir", dir},
		{"vm", "demo", "--loopback", "--qemu", qemu, "--dir", dir, "--json"},
	} {
		out, _, err := runDxpu(t, "", args...)
		var ec exitCodeError
		if !errors.As(err, &ec) || ec.code != 1 || !strings.Contains(err.Error(), qemu) {
			t.Errorf("%v: %v, want exit 1 naming %s", args, err, qemu)
		}
		if out != "" {
			t.Errorf("%v failed and printed a result:\n%s", args, out)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--dir %s: %v, want it left uncreated", dir, err)
	}
}
