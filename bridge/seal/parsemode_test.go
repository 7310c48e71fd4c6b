package seal

import (
	"errors"
	"testing"
)

func TestParseMode(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		want Mode
	}{{"gcm", ModeGCM}, {"gmac", ModeGMAC}, {"aes-256-gcm", ModeGCM}, {"aes-256-gmac", ModeGMAC}} {
		got, err := ParseMode(c.name)
		if err != nil || got != c.want {
			t.Errorf("ParseMode(%q) = %v, %v; want %v", c.name, got, err, c.want)
		}
		if back, err := ParseMode(got.String()); err != nil || back != got {
			t.Errorf("ParseMode(%q) does not read back String's name: %v, %v", got.String(), back, err)
		}
	}
	for _, bad := range []string{"", "GCM", "aes", "gcm "} {
		if _, err := ParseMode(bad); !errors.Is(err, ErrConfig) {
			t.Errorf("ParseMode(%q): err %v, want ErrConfig", bad, err)
		}
	}
}
