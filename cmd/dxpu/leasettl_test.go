package main

import "testing"

// --lease-ttl is a duration like every other (the new user's trial: it
// was the one bare number of seconds), in whole seconds as etcd's lease;
// its old spelling, a bare number of seconds, still works.
func TestLeaseTTLFlag(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]int{"3s": 3, "1m": 60, "1h": 3600, "5": 5} {
		secs := 0
		if err := (leaseTTL{&secs}).Set(s); err != nil || secs != want {
			t.Errorf("--lease-ttl %s: %d s, %v; want %d s", s, secs, err, want)
		}
	}
	for _, s := range []string{"1.5s", "500ms", "0", "0s", "-3s", "2h", "x", ""} {
		secs := 7
		if err := (leaseTTL{&secs}).Set(s); err == nil || secs != 7 {
			t.Errorf("--lease-ttl %q: taken as %d s", s, secs)
		}
	}
	secs := 3
	if got := (leaseTTL{&secs}).String(); got != "3s" {
		t.Errorf("default printed as %q, want 3s", got)
	}
}
