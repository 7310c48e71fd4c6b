package seal

import "fmt"

// ParseMode reads a mode as the daemons' --seal-mode flag names it: "gcm"
// or "gmac" (the long names String returns are accepted too).
func ParseMode(name string) (Mode, error) {
	switch name {
	case "gcm", "aes-256-gcm":
		return ModeGCM, nil
	case "gmac", "aes-256-gmac":
		return ModeGMAC, nil
	}
	return 0, fmt.Errorf("%w: --seal-mode %q: want gcm or gmac", ErrConfig, name)
}
