package main

import (
	"errors"
	"strings"
	"testing"
)

// TestBridgeCommandFlags: bad flags give exit code 2 and name the flag.
// The daemon runs under a deadline: a validation that regresses lets it
// start, and the test fails instead of hanging.
func TestBridgeCommandFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--role", "middle"}, "--role"},
		{[]string{"--role", "host", "--listen", "x"}, "--listen"},
		{[]string{"--role", "host", "--listen", "127.0.42.10:1", "--peer", "127.0.42.11:1", "--pcie", "pci"}, "--pcie"},
		{[]string{"--role", "host", "--listen", "127.0.42.10:1", "--peer", "127.0.42.11:1", "--pcie", "emu-gpu"}, "--role host takes"},
		{[]string{"--role", "gpu", "--listen", "127.0.42.10:1", "--peer", "127.0.42.11:1", "--pcie", "nettlp:127.0.42.1:127.0.42.2"}, "--role gpu takes"},
		{[]string{"--role", "gpu", "--listen", "127.0.42.10:1", "--peer", "127.0.42.11:1", "--pcie", "memory", "--mem-size", "lots"}, "--mem-size"},
	} {
		_, _, err := runDxpu(t, "", append([]string{"bridge"}, tc.args...)...)
		var ec exitCodeError
		if !errors.As(err, &ec) || ec.code != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want exit code 2 naming %q", tc.args, err, tc.want)
		}
	}
}
