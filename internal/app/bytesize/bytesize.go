// Package bytesize reads the byte counts of command-line flags: 64M, 1G,
// 4096, 0x1000, 512K, with K, M, G and T suffixes meaning powers of 1024.
package bytesize

import (
	"fmt"
	"strconv"
	"strings"
)

// Parse reads the byte count s of the flag named flag (without dashes);
// its error names the flag and the value.
func Parse(flag, s string) (uint64, error) {
	t := strings.TrimSpace(s)
	shift := 0
	if n := len(t); n > 0 {
		switch strings.ToUpper(t[n-1:]) {
		case "K":
			shift = 10
		case "M":
			shift = 20
		case "G":
			shift = 30
		case "T":
			shift = 40
		}
		if shift > 0 {
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseUint(t, 0, 64)
	if err != nil || (shift > 0 && v > (1<<64-1)>>shift) {
		return 0, fmt.Errorf("--%s %q: want a byte count like 64M, 4096 or 0x1000", flag, s)
	}
	return v << shift, nil
}

// ParseList reads a comma-separated list of byte counts of the flag named
// flag ("" is an empty list).
func ParseList(flag, s string) ([]uint64, error) {
	if s == "" {
		return nil, nil
	}
	var out []uint64
	for i, f := range strings.Split(s, ",") {
		if strings.TrimSpace(f) == "" {
			return nil, fmt.Errorf("--%s %q: item %d is empty", flag, s, i+1)
		}
		n, err := Parse(flag, strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// Format writes a byte count as Parse reads it, with the largest suffix
// that divides it: 65536 is 64K, 16777216 16M, 1000 stays 1000.
func Format(n uint64) string {
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"G", 30}, {"M", 20}, {"K", 10}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return strconv.FormatUint(n>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatUint(n, 10)
}
