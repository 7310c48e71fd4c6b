package main

import (
	"log/slog"
	"os"

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
