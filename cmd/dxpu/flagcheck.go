package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
)

// flagsPositive returns an error naming the first of the int or duration
// flags that holds zero or less, with its value; flagsNonNegative the
// first below zero (flags whose 0 means "the default"). One line, one
// flag: a message listing every flag leaves the user to find theirs.
func flagsPositive(cmd *cobra.Command, names ...string) error {
	return checkFlags(cmd, names, func(v float64) bool { return v > 0 }, "must be positive")
}

func flagsNonNegative(cmd *cobra.Command, names ...string) error {
	return checkFlags(cmd, names, func(v float64) bool { return v >= 0 }, "must not be negative (0: the default)")
}

func checkFlags(cmd *cobra.Command, names []string, ok func(float64) bool, want string) error {
	for _, name := range names {
		f := cmd.Flags().Lookup(name)
		if f == nil {
			return fmt.Errorf("internal: no flag --%s", name)
		}
		s := f.Value.String()
		var v float64
		switch f.Value.Type() {
		case "int":
			n, err := strconv.Atoi(s)
			if err != nil {
				return fmt.Errorf("--%s %s: %w", name, s, err)
			}
			v = float64(n)
		case "duration":
			d, err := time.ParseDuration(s)
			if err != nil {
				return fmt.Errorf("--%s %s: %w", name, s, err)
			}
			v = float64(d)
		default:
			return fmt.Errorf("internal: --%s is a %s flag", name, f.Value.Type())
		}
		if !ok(v) {
			return fmt.Errorf("--%s %s: %s", name, s, want)
		}
	}
	return nil
}
