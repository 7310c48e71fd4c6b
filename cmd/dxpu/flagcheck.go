package main

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dxpu/dxpu/internal/app/bytesize"
	"github.com/dxpu/dxpu/internal/app/units"
)

// flagsPositive returns an error naming the first of the int, byte-count,
// float or duration flags that holds zero or less, with its value;
// flagsNonNegative the first below zero (flags whose 0 means "the
// default"). One line, one flag: a message listing every flag leaves the
// user to find theirs.
func flagsPositive(cmd *cobra.Command, names ...string) error {
	return checkFlags(cmd, names, func(v float64) bool { return v > 0 }, "must be positive")
}

func flagsNonNegative(cmd *cobra.Command, names ...string) error {
	return checkFlags(cmd, names, func(v float64) bool { return v >= 0 }, "must not be negative (0: the default)")
}

// flagsProbability returns an error naming the first of the float flags
// that is not a probability: finite and from 0 to 1. The test is written
// !(p >= 0 && p <= 1), so that NaN, which every comparison fails, fails it.
func flagsProbability(cmd *cobra.Command, names ...string) error {
	return checkFlags(cmd, names, func(v float64) bool { return v >= 0 && v <= 1 }, "want a probability from 0 to 1")
}

// flagsRate returns an error naming the first of the float flags that is
// not a finite rate of 0 or more (NaN and ±Inf fail); the command checks
// its own upper bound and whether 0 is allowed.
func flagsRate(cmd *cobra.Command, names ...string) error {
	return checkFlags(cmd, names, func(v float64) bool { return v >= 0 && !math.IsInf(v, 0) }, "want a finite rate, 0 or more")
}

func checkFlags(cmd *cobra.Command, names []string, ok func(float64) bool, want string) error {
	fs := cmd.Flags()
	for _, name := range names {
		var v float64
		var err error
		switch f := fs.Lookup(name); {
		case f == nil:
			return fmt.Errorf("internal: no flag --%s", name)
		case f.Value.Type() == "int":
			var n int
			n, err = fs.GetInt(name)
			v = float64(n)
		case f.Value.Type() == "bytes": // bytesVar's
			var n uint64
			n, err = bytesize.Parse(name, f.Value.String())
			v = float64(n)
		case f.Value.Type() == "float64":
			v, err = fs.GetFloat64(name)
		case f.Value.Type() == "duration":
			var d time.Duration
			d, err = fs.GetDuration(name)
			v = float64(d)
		default:
			return fmt.Errorf("internal: --%s is a %s flag", name, f.Value.Type())
		}
		if err != nil {
			return err
		}
		if !ok(v) {
			return fmt.Errorf("--%s %s: %s", name, flagText(fs.Lookup(name)), want)
		}
	}
	return nil
}

// flagsGiven returns an error naming the first of the flags that was
// given with an empty value (a string flag: "" or blanks; an int: 0) where
// the empty value stands for the default: typed out, it would run the
// default silently (`--pairs ”` ran the whole 32-pair sweep).
func flagsGiven(cmd *cobra.Command, names ...string) error {
	fs := cmd.Flags()
	for _, name := range names {
		f := fs.Lookup(name)
		if f == nil {
			return fmt.Errorf("internal: no flag --%s", name)
		}
		if !f.Changed {
			continue
		}
		switch v := f.Value.String(); {
		case (f.Value.Type() == "int" || f.Value.Type() == "bytes") && v == "0":
			return fmt.Errorf("--%s 0: leave the flag out for its default", name)
		case strings.TrimSpace(v) == "":
			return fmt.Errorf("--%s %q: empty; leave the flag out for its default", name, v)
		}
	}
	return nil
}

// flagText is a flag's value as errors quote it: a duration as `dxpu help
// units` spells it (5us; pflag writes Go's 5µs), anything else as given.
func flagText(f *pflag.Flag) string {
	if f.Value.Type() == "duration" {
		if d, err := time.ParseDuration(f.Value.String()); err == nil {
			return units.Duration(d)
		}
	}
	return f.Value.String()
}
