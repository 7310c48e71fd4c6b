package bridge

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestNegativeTimersRefused: Defaults fills zeros only, so a negative
// timer reached the bridge as given; a Keepalive of -5ms made it send
// without pause (a daemon sent 383264 frames in 29 s). Every timer field
// below zero is ErrConfig naming the field and the value, and so is a
// negative Window, which Defaults rounded to a window of 1.
func TestNegativeTimersRefused(t *testing.T) {
	t.Parallel()
	neg := -5 * time.Millisecond
	for field, set := range map[string]func(*Config){
		"CompletionTimeout": func(c *Config) { c.CompletionTimeout = neg },
		"AckDelay":          func(c *Config) { c.AckDelay = neg },
		"InitialRTO":        func(c *Config) { c.InitialRTO = neg },
		"MinRTO":            func(c *Config) { c.MinRTO = neg },
		"MaxRTO":            func(c *Config) { c.MaxRTO = neg },
		"Keepalive":         func(c *Config) { c.Keepalive = neg },
		"DeadAfter":         func(c *Config) { c.DeadAfter = neg },
		"HelloInterval":     func(c *Config) { c.HelloInterval = neg },
		"RekeyGraceTime":    func(c *Config) { c.RekeyGraceTime = neg },
	} {
		c := Config{Role: RoleGPU, PairID: 1}
		set(&c)
		_, err := New(c)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), field+": -5ms is negative") {
			t.Errorf("%s -5ms: %v, want ErrConfig naming it", field, err)
		}
	}
	if _, err := New(Config{Role: RoleGPU, PairID: 1, Window: -4}); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "Window: -4") {
		t.Errorf("Window -4: %v, want ErrConfig naming it", err)
	}
	// Zero is each field's default, as before.
	b, err := New(Config{Role: RoleGPU, PairID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if c := b.Config(); c.Keepalive != time.Millisecond || c.Window != DefaultWindow {
		t.Errorf("defaults: Keepalive %v, Window %d", c.Keepalive, c.Window)
	}
}
