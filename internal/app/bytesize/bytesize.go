// Package bytesize reads the byte counts of command-line flags: 64M, 1G,
// 4096, 0x1000, 512K, with K, M, G and T suffixes meaning powers of 1024.
package bytesize

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Parse reads the byte count s of the flag named flag (without dashes);
// its error names the flag and the value.
func Parse(flag, s string) (uint64, error) {
	v, ok := parse(s)
	if !ok {
		return 0, fmt.Errorf("--%s %q: %s", flag, s, want)
	}
	return v, nil
}

// want is what a refusal says a byte count looks like.
const want = "want a byte count like 64M, 4096 or 0x1000"

func parse(s string) (uint64, bool) {
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
		return 0, false
	}
	return v << shift, true
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

// Value is a flag value (pflag.Value) that keeps a byte count in a
// number of type T and reads what Parse reads: 4096, 4K, 0x1000. Every
// flag that takes a count of bytes is one, so that each takes the
// suffixes `dxpu help units` promises.
type Value[T ~int | ~uint32 | ~uint64] struct{ p *T }

// NewValue returns a Value over p, set to def.
func NewValue[T ~int | ~uint32 | ~uint64](p *T, def T) *Value[T] {
	*p = def
	return &Value[T]{p: p}
}

// String writes the count as Format does: help shows (default 64M).
func (v *Value[T]) String() string {
	if v == nil || v.p == nil {
		return "0"
	}
	return Format(uint64(*v.p))
}

// Type names the value in help: --read-size bytes.
func (v *Value[T]) Type() string { return "bytes" }

// Set reads s. Its refusal says what a count looks like (pflag names the
// flag and the value before it).
func (v *Value[T]) Set(s string) error {
	n, ok := parse(s)
	if !ok {
		return errors.New(want + " (K, M, G, T: powers of 1024)")
	}
	if top := maxOf[T](); n > top {
		return fmt.Errorf("want at most %s bytes", Format(top))
	}
	*v.p = T(n)
	return nil
}

// maxOf is the largest count a T holds.
func maxOf[T ~int | ~uint32 | ~uint64]() uint64 {
	if m := ^T(0); m > 0 {
		return uint64(m) // unsigned: all ones
	}
	return uint64(^uint(0) >> 1) // int
}
