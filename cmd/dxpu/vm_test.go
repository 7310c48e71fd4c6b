package main

import (
	"errors"
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
