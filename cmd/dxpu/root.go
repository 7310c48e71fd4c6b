package main

import (
	"errors"
	"log/slog"
	"os"

	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/spf13/cobra"
)

// rootCmd is the top of the command tree; every subcommand file adds itself
// with rootCmd.AddCommand in its init function.
var rootCmd = &cobra.Command{
	Use:           "dxpu",
	Short:         "Datacenter-scale GPU disaggregation: PCIe TLPs over Ethernet",
	SilenceUsage:  true,
	SilenceErrors: true,
	PersistentPreRun: func(cmd *cobra.Command, args []string) {
		level := slog.LevelInfo
		if verbose {
			level = slog.LevelDebug
		}
		slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
	},
}

var verbose bool

func init() {
	rootCmd.PersistentFlags().BoolVarP(&verbose, "verbose", "v", false, "log debug messages")
}

// exitCodeError carries a process exit status out of a subcommand: 1 for
// "ran, but some input was bad", 2 for usage or I/O errors.
type exitCodeError struct {
	code int
	err  error
}

func (e exitCodeError) Error() string {
	if e.err == nil {
		return "exit status"
	}
	return e.err.Error()
}

func (e exitCodeError) Unwrap() error { return e.err }

// exitFor maps a product's error to an exit status: apperr.ErrUsage 2,
// apperr.ErrFailed 1, any other error def.
func exitFor(err error, def int) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, apperr.ErrUsage):
		return exitCodeError{2, err}
	case errors.Is(err, apperr.ErrFailed):
		return exitCodeError{1, err}
	}
	return exitCodeError{def, err}
}
