package main

import (
	"errors"
	"testing"
)

// TestConformFlags: bad flags are usage errors before anything is sent.
func TestConformFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"conform", "--role", "gpu"},
		{"conform", "--peer", "udp:127.0.0.1:1", "--role", "switch"},
		{"conform", "--peer", "udp:127.0.0.1:1", "--role", "gpu", "--pair", "0"},
		{"conform", "--peer", "tcp:127.0.0.1:1", "--role", "gpu", "--local", "127.0.0.1:0"},
		{"conform", "--peer", "udp:127.0.0.1:1", "--role", "gpu", "--key-file", "/nonexistent/pair.key"},
		{"conform", "--peer", "udp:127.0.0.1:1", "--role", "gpu", "--next-key-file", "/nonexistent/next.key"},
	} {
		_, _, err := runDxpu(t, "", args...)
		var ec exitCodeError
		if err == nil || (errors.As(err, &ec) && ec.code != 2) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
	// --mtu within what a bridge takes (it ran the scenarios with 100000;
	// second new-user trial).
	for _, mtu := range []string{"10", "100000"} {
		checkUsageError(t, []string{"conform", "--peer", "udp:127.0.0.1:1", "--role", "gpu", "--mtu", mtu}, "--mtu "+mtu+": want 62 (one header-only TLP) up to 65507")
	}
}

// TestRulesFailed: the kit's exit line counts in English ("1 rules
// failed" was printed).
func TestRulesFailed(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]string{1: "conform: 1 rule failed", 2: "conform: 2 rules failed", 12: "conform: 12 rules failed"} {
		if got := rulesFailed(n).Error(); got != want {
			t.Errorf("rulesFailed(%d) = %q, want %q", n, got, want)
		}
	}
}
