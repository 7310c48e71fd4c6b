package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/app/buildinfo"
	"github.com/dxpu/dxpu/internal/app/units"
)

// newRootCmd builds the whole command tree over e: its streams, its
// arguments, and --verbose setting the level of e's logger.
func newRootCmd(e *env) *cobra.Command {
	var verbose bool
	root := &cobra.Command{
		Use:           "dxpu",
		Short:         "Datacenter-scale GPU disaggregation: PCIe TLPs over Ethernet",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			if verbose {
				e.level.Set(slog.LevelDebug)
			}
			warnDeprecated(cmd, e.stderr)
		},
	}
	root.PersistentFlags().BoolVarP(&verbose, "verbose", "v", false, "log debug messages")
	if v, ok := buildinfo.Read(); ok {
		root.Version = v.String()
	} else {
		root.Version = "unknown (no build information)"
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(newBridgeCmd(e), newSwitchCmd(e), newManagerCmd(e), newCtlCmd(e), newNettlpCmd(e),
		newPcapCmd(), newTLPCmd(), newReplayCmd(), newModelCmd(), newDemoCmd(), newBenchCmd(e), newConformCmd(e), newVMCmd(e), newChaosCmd(e),
		newManCmd(), newUnitsTopic())
	root.SetHelpCommand(newHelpCmd())
	// Cobra adds `completion` when the tree runs, after the passes below;
	// added now, it refuses operands as every other command does
	// (`completion extra` printed its help and succeeded).
	root.InitDefaultCompletionCmd()
	refuseUnknownSubcommands(root)
	needShell(root)
	nameArgCountErrors(root)
	spellDefaultsAsUnits(root)
	root.SetFlagErrorFunc(suggestFlag) // inherited by every subcommand
	root.SetArgs(e.args)
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	return root
}

// needShell makes `dxpu completion` without a shell a usage error that
// names the shells: as a group it printed its help and exited 0, so
// `source <(dxpu completion)` sourced the help.
func needShell(root *cobra.Command) {
	for _, c := range root.Commands() {
		if c.Name() != "completion" || c.RunE == nil {
			continue
		}
		unknown := c.RunE
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknown(cmd, args)
			}
			var shells []string
			for _, sh := range cmd.Commands() {
				if sh.IsAvailableCommand() {
					shells = append(shells, sh.Name())
				}
			}
			list := strings.Join(shells, ", ")
			if n := len(shells); n > 1 {
				list = strings.Join(shells[:n-1], ", ") + " or " + shells[n-1]
			}
			return exitCodeError{2, fmt.Errorf("completion: name a shell: %s; usage: %s completion SHELL", list, root.Name())}
		}
	}
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

// spellDefaultsAsUnits writes the defaults of duration flags in --help
// and the man pages as `dxpu help units` spells them, 5us rather than Go's
// 5µs: the flag's value is unchanged, only its printed default.
func spellDefaultsAsUnits(c *cobra.Command) {
	fix := func(f *pflag.Flag) {
		if f.Value.Type() == "duration" {
			if d, err := time.ParseDuration(f.DefValue); err == nil {
				f.DefValue = units.Duration(d)
			}
		}
	}
	c.Flags().VisitAll(fix)
	c.PersistentFlags().VisitAll(fix)
	for _, sub := range c.Commands() {
		spellDefaultsAsUnits(sub)
	}
}
