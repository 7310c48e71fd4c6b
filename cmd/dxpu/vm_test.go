package main

import (
	"errors"
	"strings"
	"testing"
)

// TestVMFlags: bad settings are usage errors before QEMU is looked for.
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
		{[]string{"vm", "run", "--gpu", "pair=0,listen=127.0.0.1:1,peer=127.0.0.1:2"}, "16777215"},
		{[]string{"vm", "run", "--gpu", "pair=1,listen=127.0.0.1:1,peer=127.0.0.1:2,colour=red"}, "unknown key"},
		{[]string{"vm", "run", "--gpu", "pair=1,listen=here,peer=127.0.0.1:2"}, "listen"},
		{[]string{"vm", "run", "--gpu", "pair=1,listen=127.0.0.1:1,peer=127.0.0.1:2"}, "key=FILE is needed"},
		{[]string{"vm", "run", "--gpu", "pair=1,listen=127.0.0.1:1,peer=127.0.0.1:2,key=/nonexistent"}, "pair key file"},
	} {
		_, _, err := runDxpu(t, "", tc.args...)
		var ec exitCodeError
		if !errors.As(err, &ec) || ec.code != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want exit 2 mentioning %q", tc.args, err, tc.want)
		}
	}
}

func TestParseVMGPU(t *testing.T) {
	t.Parallel()
	g, err := parseVMGPU("pair=7,listen=127.0.0.1:0,peer=127.0.0.1:9", true)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Transport.Close()
	if g.Bridge.PairID != 7 {
		t.Fatalf("pair %d", g.Bridge.PairID)
	}
}
